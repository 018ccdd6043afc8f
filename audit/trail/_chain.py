"""The hash chain of a run's audit events, and its verification (docs/audit.md).

Each event is hashed with the previous event's hash::

    hash(n) = H(hash(n-1) ‖ canonical JSON of {run_id, seq, kind, cycle, ts, payload})

where canonical JSON has sorted keys and compact separators, ``hash(0)`` is
:data:`GENESIS` (64 zeros) and ``H`` is sha256, or HMAC-SHA256 with a secret key
(``CONVERGE_AUDIT_KEY`` or ``open_store(key=...)``): without the key nobody can
re-chain altered rows. ``runs.head_hash`` holds the last hash, so a change to the
tail shows too. :func:`read_chain` reads a run's chained rows, :func:`verify_chain`
recomputes a chain and names the first bad ``seq`` and why. The hashing is
:mod:`engine.hashing.chain`'s; this module reads and checks the stored rows.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

from sqlalchemy import Connection, select

from audit.tables import audit_events
from engine.hashing.chain import GENESIS, KEYED, PLAIN, event_message, hasher
from engine.hashing.commitment import chain_parts, chained_payload

__all__ = [
    "GENESIS",
    "KEYED",
    "PLAIN",
    "ChainRow",
    "VerifyReport",
    "event_message",
    "hasher",
    "read_chain",
    "verify_chain",
]

_quote: Callable[[str], str] = json.encoder.encode_basestring
_FACTS = frozenset({"fact_promoted", "run_started"})


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """The outcome of verifying one run's chain.

    ``ok`` is true when every event and the head verify; otherwise ``first_bad_seq``
    is the first sequence number that fails and ``reason`` one of ``payload changed``
    (a row differs from what was hashed), ``row missing`` (a gap in ``seq``),
    ``row inserted`` (a row that was never chained), ``head mismatch``
    (``runs.head_hash`` or ``last_seq`` disagrees with the last row), ``key required``
    (a keyed chain verified without the key) or ``chain not keyed`` (a plain chain
    where a key is set). ``events`` counts the rows read.
    """

    run_id: str
    ok: bool
    events: int
    first_bad_seq: int | None = None
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready dict of the report."""
        return asdict(self)

    def __str__(self) -> str:
        if self.ok:
            return f"{self.run_id}: ok ({self.events} events)"
        return f"{self.run_id}: FAILED at seq {self.first_bad_seq}: {self.reason}"


class ChainRow(NamedTuple):
    """One stored event, as the verifier reads it (a named tuple: an export or a
    verify of a 100k-fact run builds 100k of them)."""

    seq: int
    kind: str
    cycle: int
    ts: float
    payload: str
    hash: str


CHAIN_COLUMNS = (
    audit_events.c.seq,
    audit_events.c.kind,
    audit_events.c.cycle,
    audit_events.c.ts,
    audit_events.c.payload,
    audit_events.c.hash,
)
"""The columns of an event the chain hashes, in :class:`ChainRow`'s order."""


def read_chain(conn: Connection, run_id: str) -> list[ChainRow]:
    """The run's stored events as the chain hashed them, in ``seq`` order (empty for
    an unknown run); the one query behind ``converge verify`` and ``converge export``."""
    query = (
        select(*CHAIN_COLUMNS).where(audit_events.c.run_id == run_id).order_by(audit_events.c.seq)
    )
    return list(map(ChainRow._make, conn.execute(query).all()))


def verify_chain(
    run_id: str,
    rows: Sequence[ChainRow],
    *,
    head_hash: str,
    last_seq: int,
    chain: str,
    key: bytes | None,
    messages: list[str] | None = None,
) -> VerifyReport:
    """Recompute the chain of ``rows`` (ordered by ``seq``) against the ``runs`` row.

    ``head_hash``/``last_seq``/``chain`` come from the run's ``runs`` row; ``key``
    is the HMAC key (None = plain sha256). ``messages``, when given, receives each
    verified row's :func:`event_message` (an export hashes them again; of a chain of
    format 2, ``sha256/2``, the message its facts' commitments make). Never raises
    for a bad chain: the report says where and why.
    """
    n = len(rows)

    def bad(seq: int, reason: str) -> VerifyReport:
        return VerifyReport(run_id, False, n, seq, reason)

    kind, committed = chain_parts(chain)
    if key is None and kind == KEYED:
        return bad(1, "key required")
    if key is not None and kind != KEYED:
        return bad(1, "chain not keyed")
    h = hasher(key)
    rid = _quote(run_id)
    if committed:  # format 2: facts chained through their commitments
        rows = [
            r._replace(payload=chained_payload(r.kind, r.payload)) if r.kind in _FACTS else r
            for r in rows
        ]

    def digest(prev: str, row: ChainRow, seq: int) -> str:
        return h(prev, event_message(rid, seq, row.kind, row.cycle, row.ts, row.payload))

    prev = GENESIS
    before_prev = GENESIS
    expected = 1
    for i, row in enumerate(rows):
        if row.seq > last_seq:
            return bad(row.seq, "row inserted")
        if row.seq < expected:
            return bad(row.seq, "row inserted")
        if row.seq > expected:
            return bad(expected, "row missing")
        message = event_message(rid, expected, row.kind, row.cycle, row.ts, row.payload)
        if h(prev, message) != row.hash:
            nxt = rows[i + 1] if i + 1 < n else None
            # the next row chains onto our predecessor: this row was slipped in
            if nxt is not None and digest(prev, nxt, expected) == nxt.hash:
                return bad(expected, "row inserted")
            # this row chains onto the row before our predecessor: that one was slipped in
            if i > 0 and digest(before_prev, row, expected - 1) == row.hash:
                return bad(expected - 1, "row inserted")
            return bad(expected, "payload changed")
        if messages is not None:
            messages.append(message)
        before_prev, prev = prev, row.hash
        expected += 1
    if expected - 1 < last_seq:
        return bad(expected, "row missing")
    if prev != head_hash:
        return bad(last_seq, "head mismatch")
    return VerifyReport(run_id, True, n)
