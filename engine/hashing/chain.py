"""The hash chain of a run's audit events: each event's message and its link hash.

Each event is hashed with the previous event's hash::

    hash(n) = H(hash(n-1) ‖ canonical JSON of {run_id, seq, kind, cycle, ts, payload})

where ``hash(0)`` is :data:`GENESIS` (64 zeros) and ``H`` is sha256 (:data:`PLAIN`),
or HMAC-SHA256 with the store's secret key (:data:`KEYED`). The store's ledger
chains its entries with the same function (:mod:`engine.hashing.ledger`). Pinned by
``tests/vectors/happy-path.json``, ``happy-path-keyed.json`` and the tamper cases.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable, Sequence

__all__ = ["GENESIS", "KEYED", "PLAIN", "event_message", "fact_links", "hasher"]

GENESIS = "0" * 64
"""The "previous hash" of a run's first event (and of the ledger's first entry)."""

PLAIN = "sha256"
"""The ``runs.chain`` of a chain hashed with plain sha256."""

KEYED = "hmac-sha256"
"""The ``runs.chain`` of a chain hashed with HMAC-SHA256 under the store's key."""

_quote: Callable[[str], str] = json.encoder.encode_basestring
_FRESH = hashlib.sha256().copy


def event_message(
    run_id_json: str, seq: int, kind: str, cycle: int, ts: float, payload: str
) -> str:
    """The canonical JSON of one event, from its already-canonical ``payload`` text.

    ``run_id_json`` is the run id as a JSON string (quoted once per batch, not per row).
    Equal to ``canonical_json`` of the dict, keys in sorted order.
    """
    return (
        f'{{"cycle":{cycle},"kind":{_quote(kind)},"payload":{payload},'
        f'"run_id":{run_id_json},"seq":{seq},"ts":{float(ts)!r}}}'
    )


def hasher(key: bytes | None) -> Callable[[str, str], str]:
    """The chain function ``(prev_hash, message) -> hex hash``: sha256, or HMAC with ``key``."""
    if key is None:
        sha = hashlib.sha256

        def plain(prev: str, message: str) -> str:
            return sha((prev + message).encode()).hexdigest()

        return plain
    base = hmac.new(key, digestmod=hashlib.sha256)

    def keyed(prev: str, message: str) -> str:
        h = base.copy()
        h.update((prev + message).encode())
        return h.hexdigest()

    return keyed


def fact_links(
    prev: str,
    seq: int,
    run_id_json: str,
    cycle: int,
    ts: float,
    texts: Sequence[str],
    key: bytes | None,
    wrap: tuple[str, str] = ("", ""),
) -> tuple[list[str], str]:
    """The link hashes of ``fact_promoted`` events ``seq + 1 ..`` whose payloads are
    ``texts`` (one cycle, one timestamp), chained after ``prev``; and the last one.
    ``wrap`` (before, after) surrounds each text in the payload: chain format 2
    chains ``{"commitment":"C"}`` from the bare commitments C, with no text built
    per fact (``engine.hashing.commitment.COMMITTED_WRAP``).

    The bytes of :func:`event_message`, with its constant parts built once per call:
    this is the hot loop of an audited run (one hash per fact, no call per fact).
    """
    pre = f'{{"cycle":{cycle},"kind":"fact_promoted","payload":{wrap[0]}'
    mid = f'{wrap[1]},"run_id":{run_id_json},"seq":'
    tail = f',"ts":{float(ts)!r}}}'
    hashes: list[str] = []
    push = hashes.append
    s = seq
    if key is None:
        fresh = _FRESH  # a copy of an empty sha256: cheaper than a new one per fact
        for text in texts:
            s += 1
            h = fresh()
            h.update(f"{prev}{pre}{text}{mid}{s}{tail}".encode())
            prev = h.hexdigest()
            push(prev)
    else:
        base = hmac.new(key, digestmod=hashlib.sha256)
        for text in texts:
            s += 1
            m = base.copy()
            m.update(f"{prev}{pre}{text}{mid}{s}{tail}".encode())
            prev = m.hexdigest()
            push(prev)
    return hashes, prev
