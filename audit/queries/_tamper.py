"""A cheap look for tampering, for the commands that show a run (``facts``, ``report``,
``show``, ``lineage``): not ``converge verify``, which recomputes the whole chain and
checks every row against it, but what costs two rows and the facts already read.

- the run's head: the ``runs`` row's ``head_hash`` and ``last_seq`` must be its
  chain's last link, the event at ``last_seq``, whose hash recomputes from its own
  cells and the hash of the event before it (a keyed chain, without its key:
  compared only);
- its facts, when the caller read them all: their Merkle root must be the run's
  recorded ``facts_root`` (a fact's content edited anywhere in the chain changes it).

:func:`tamper_hint` names the first that fails, or None.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import select

from audit.cells import loads
from audit.core import StoreCore
from audit.queries._chain_head import key_problem
from audit.tables import audit_events, runs
from audit.trail import CHAIN_COLUMNS, ChainRow
from engine.facts import Fact
from engine.hashing.chain import GENESIS, KEYED, event_message, hasher
from engine.hashing.commitment import chain_parts, chained_payload
from engine.hashing.merkle import SALTED, facts_root, merkle_scheme

__all__ = ["tamper_hint"]

_quote: Callable[[str], str] = json.encoder.encode_basestring  # as the chain quotes ids


def tamper_hint(store: StoreCore, run_id: str, facts: Sequence[Fact] | None = None) -> str | None:
    """Why run ``run_id`` looks altered, in a few words, or None when its head is its
    chain's last link and ``facts`` (all its facts, in promotion order, when given)
    hash to its recorded facts root. Reads two events and the ``runs`` row; never
    raises for a cell it cannot read (that is a hint too). Raises ``StoreError``."""
    ev = audit_events.c
    with store.transaction(write=False) as conn:
        run = conn.execute(
            select(runs.c.head_hash, runs.c.last_seq, runs.c.chain, runs.c.facts_root).where(
                runs.c.run_id == run_id
            )
        ).one_or_none()
        if run is None or not run.last_seq:
            return None  # no run (the caller says so), or queued: nothing chained yet
        rows = [
            ChainRow._make(r)
            for r in conn.execute(
                select(*CHAIN_COLUMNS)
                .where(ev.run_id == run_id, ev.seq >= run.last_seq - 1)
                .order_by(ev.seq)
            ).all()
        ]
        first = (
            conn.execute(select(ev.payload).where(ev.run_id == run_id, ev.seq == 1)).scalar()
            if facts is not None and run.facts_root
            else None
        )
    problem = _head_problem(store, run_id, run, rows)
    if problem is None and first is not None and facts is not None:
        problem = _facts_problem(first, facts, run.facts_root)
    return problem


def _head_problem(store: StoreCore, run_id: str, run: Any, rows: list[ChainRow]) -> str | None:
    """Why the ``runs`` row ``run`` (head_hash, last_seq, chain) is not the chain's
    last link among ``rows`` (its last two events), or None."""
    last_seq, head, chain = run.last_seq, run.head_hash, run.chain
    if not rows or rows[-1].seq != last_seq:
        return f"its last event is not seq {last_seq}, where its head says it ends"
    last = rows[-1]
    if last.hash != head:
        return f"its head is not the hash of its last event (seq {last_seq})"
    kind, committed = chain_parts(chain)
    key = store.key if kind == KEYED else None
    if kind == KEYED and (key is None or key_problem(store) is not None):
        return None  # a keyed chain without its key: the hashes cannot be recomputed
    prev = rows[-2].hash if len(rows) > 1 else GENESIS
    try:
        payload = chained_payload(last.kind, last.payload) if committed else last.payload
        message = event_message(_quote(run_id), last.seq, last.kind, last.cycle, last.ts, payload)
        digest = hasher(key)(prev, message)
    except (TypeError, ValueError):
        return f"its last event (seq {last_seq}) cannot be read"
    if digest != last.hash:
        return f"its last event (seq {last_seq}) does not hash to its recorded hash"
    return None


def _facts_problem(first: str, facts: Sequence[Fact], recorded: str) -> str | None:
    try:
        started = loads(first)
        scheme = merkle_scheme(started.get("facts_merkle") if isinstance(started, dict) else None)
        if scheme == SALTED:
            return None  # its leaves are the facts' commitments: `converge verify` checks them
        root = facts_root(facts, scheme)
    except (TypeError, ValueError):
        return "its first event cannot be read"
    if root != recorded:
        return "its facts do not hash to the facts root it recorded"
    return None
