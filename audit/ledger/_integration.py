"""A sequencer pass: pending run heads integrated into the store-wide ledger in one batch
(docs/audit.md, "The ledger's integration delay").

A *pass* (:func:`integrate`) is one short transaction that locks the ledger head
(``converge_meta.ledger_head``), appends the pending heads of ``ledger_pending`` in
a deterministic order (run id, then the run's ``last_seq``: a run's heads stay in
commit order), chains them as :func:`audit.ledger._ledger.append` does one entry, moves
the ledger head, deletes them and, with a signing key, signs the new head of the
ledger's RFC 6962 tree (one tree extension and one signed head per batch). A head
at or below what the ledger holds of its run is dropped, never appended. A pass
killed halfway (kill -9) commits nothing: the next one integrates the same heads.
Who runs the passes, and when, is :mod:`audit.ledger._sequencer`'s.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, delete, func, insert, select, tuple_, update

from audit.core import StoreCore
from audit.ledger._ledger import LEDGER_HEAD
from audit.ledger._tree import HEAD_TYPE
from audit.signing import (
    Signer,
    ensure_signature_tables,
    keep_statement,
    stored_statement,
)
from audit.tables import ledger, ledger_pending, meta
from audit.trail import keyed_as
from engine.errors import StoreError
from engine.hashing.chain import GENESIS
from engine.hashing.ledger import entry_message, parse_anchor
from engine.hashing.merkle import MerkleFrontier, leaf_hash

__all__ = [
    "INTEGRATE_LIMIT",
    "append_inline",
    "integrate",
    "integrate_own",
    "integrate_pending",
    "pending_count",
]

log = logging.getLogger("converge.audit")

INTEGRATE_LIMIT = 1000
"""Most heads one pass's transaction integrates (a pass loops until none is left)."""

_pending = ledger_pending.c

_PENDING = select(
    _pending.run_id,
    _pending.last_seq,
    _pending.head,
    # the run's latest integrated last_seq (one probe of ix_ledger_run_seq per head)
    select(ledger.c.last_seq)
    .where(ledger.c.run_id == _pending.run_id)
    .order_by(ledger.c.seq.desc())
    .limit(1)
    .scalar_subquery(),
).order_by(_pending.run_id, _pending.last_seq)
"""The pending heads in the order they are integrated: by run, in commit order."""


def append_inline(
    store: StoreCore, conn: Connection, run_id: str, last_seq: int, head: str
) -> None:
    """(delay 0) Append the run's new head to the ledger in the commit's transaction,
    after the heads still pending (left by processes with a delay)."""
    found = _lock_head(conn, wait=True)
    assert found is not None
    rows = conn.execute(_PENDING).all()
    _append(conn, store, *found, [*_forward(rows), (run_id, last_seq, head)])
    if rows:
        _clear(conn, rows)


def _lock_head(conn: Connection, *, wait: bool) -> tuple[int, str] | None:
    """Lock the ledger head for this transaction: its (seq, hash); None when another
    pass holds it and ``wait`` is false (PostgreSQL ``SKIP LOCKED``)."""
    q = select(meta.c.value).where(meta.c.key == LEDGER_HEAD).with_for_update(skip_locked=not wait)
    value = conn.execute(q).scalar()
    if value is None:
        return None if not wait else (0, GENESIS)
    return parse_anchor(value)


def _append(
    conn: Connection, store: StoreCore, seq: int, prev: str, rows: Sequence[Any]
) -> tuple[int, str]:
    """Chain ``rows`` of (run_id, last_seq, head) after ledger entry ``seq`` (hash
    ``prev``) and move the ledger head; the new (seq, hash)."""
    values = []
    for run_id, last_seq, head in rows:
        seq += 1
        prev = store.chain_hash(prev, entry_message(seq, run_id, last_seq, head))
        values.append(
            {"seq": seq, "run_id": run_id, "last_seq": last_seq, "head": head, "hash": prev}
        )
    if conn.dialect.name == "postgresql" and len(values) > 1:
        conn.exec_driver_sql(_PG_APPEND, _arrays(values, _LEDGER_COLUMNS))
    else:
        conn.execute(insert(ledger), values)
    conn.execute(update(meta).where(meta.c.key == LEDGER_HEAD).values(value=f"{seq}:{prev}"))
    return seq, prev


_LEDGER_COLUMNS = ("seq", "run_id", "last_seq", "head", "hash")
_PG_APPEND = (
    f"INSERT INTO {ledger.name} (seq, run_id, last_seq, head, hash) "
    "SELECT * FROM unnest(%(seq)b::int[], %(run_id)b::text[], %(last_seq)b::int[], "
    "%(head)b::text[], %(hash)b::text[])"
)
"""(PostgreSQL) A batch's ledger entries in one statement: one binary array per column."""
_PG_CLEAR = (
    f"DELETE FROM {ledger_pending.name} p USING unnest(%(run_id)b::text[], "
    "%(last_seq)b::int[]) AS k(run_id, last_seq) "
    "WHERE p.run_id = k.run_id AND p.last_seq = k.last_seq"
)
"""(PostgreSQL) The pending heads integrated, deleted by one statement of fixed text."""


def _arrays(values: Sequence[dict[str, Any]], columns: Sequence[str]) -> dict[str, list[Any]]:
    return {c: [v[c] for v in values] for c in columns}


def _forward(rows: Sequence[Any]) -> list[tuple[str, int, str]]:
    """The pending heads that move their run forward: a head at or below what the
    ledger (or the batch) already holds of its run was never committed after it (a
    replayed or made-up row, which would hide a run cut short): dropped, logged."""
    kept: list[tuple[str, int, str]] = []
    top: dict[str, int] = {}
    for run_id, last_seq, head, integrated in rows:
        above = top.get(run_id, -1 if integrated is None else integrated)
        if last_seq <= above:
            log.warning(
                "ledger: pending head %s@%d is not after seq %d: dropped", run_id, last_seq, above
            )
            continue
        top[run_id] = last_seq
        kept.append((run_id, last_seq, head))
    return kept


def _clear(conn: Connection, rows: Sequence[Any]) -> None:
    """Delete the pending heads just integrated (and no head committed since)."""
    if conn.dialect.name == "postgresql":
        keys = {"run_id": [r[0] for r in rows], "last_seq": [r[1] for r in rows]}
        conn.exec_driver_sql(_PG_CLEAR, keys)
        return
    pairs = [(r[0], r[1]) for r in rows]
    conn.execute(
        delete(ledger_pending).where(tuple_(_pending.run_id, _pending.last_seq).in_(pairs))
    )


def _pass(
    conn: Connection, store: StoreCore, wait: bool, signer: Signer | None
) -> tuple[int | None, tuple[MerkleFrontier, str] | None]:
    """One batch: heads integrated (0: none pending; None when another pass holds
    the ledger head and ``wait`` is false), and the tree's frontier it signed."""
    found = _lock_head(conn, wait=wait)
    if found is None:
        return None, None
    rows = conn.execute(_PENDING.limit(INTEGRATE_LIMIT)).all()
    if not rows:
        return 0, None
    forward = _forward(rows)
    _clear(conn, rows)
    if not forward:
        return len(rows), None
    size, digest = _append(conn, store, *found, forward)
    signed = None if signer is None else _sign(conn, store, signer, size, digest)
    return len(rows), signed


def integrate(store: StoreCore, *, wait: bool = True, signer: Signer | None = None) -> int | None:
    """Integrate every pending head into the ledger, :data:`INTEGRATE_LIMIT` per
    transaction; with ``signer``, each transaction also signs and keeps the ledger
    head it leaves (``converge.ledger_head/1``, as ``converge anchor`` does).

    Returns the heads integrated, or None when ``wait`` is false and another pass
    holds the ledger (it integrates them). Raises ``StoreError`` when the database
    fails; nothing of a failed transaction is kept.
    """
    if signer is not None:
        ensure_signature_tables(store)
        if store.ledger_timing.frontier is None:  # read the tree before taking the lock
            with store.transaction(write=False, settle=False) as conn:
                size = conn.execute(select(func.max(ledger.c.seq))).scalar() or 0
                store.ledger_timing.frontier = _frontier(conn, store, int(size))
    total = 0
    while True:
        with store.transaction(settle=False) as conn:
            done, frontier = _pass(conn, store, wait, signer)
        if frontier is not None:  # committed: the tree of this process's next head
            store.ledger_timing.frontier = frontier
        if done is None:
            return None if total == 0 else total
        total += done
        if done < INTEGRATE_LIMIT:
            return total


def integrate_own(store: StoreCore, signer: Signer | None = None) -> None:
    """(end of a run, a pause, ``close``) A pass waiting for the ledger, when this
    process recorded pending heads: none of them is left behind by a process that
    exits. A failure is logged (the heads stay pending for the next pass)."""
    timing = store.ledger_timing
    try:
        # a read first: a pass that finds nothing would still be a write transaction
        if not timing.ever_recorded or not pending_count(store):
            return
        integrate(store, wait=True, signer=signer)
        timing.recorded = 0
    except StoreError as exc:
        log.warning("ledger sequencer pass failed (the heads stay pending): %s", exc)


def integrate_pending(store: StoreCore, signer: Signer | None = None) -> int:
    """(``converge anchor``, ``export --proof``) Integrate every committed head now, so
    that the anchor taken next covers them; how many are still pending (a store
    opened read-only, or a database failure: logged)."""
    if pending_count(store) == 0:
        return 0
    try:
        integrate(store, wait=True, signer=signer)
    except StoreError as exc:
        log.warning("cannot integrate the pending run heads: %s", exc)
    return pending_count(store)


def pending_count(store: StoreCore) -> int:
    """How many committed run heads wait for the sequencer."""
    with store.transaction(write=False, settle=False) as conn:
        return int(conn.execute(select(func.count()).select_from(ledger_pending)).scalar() or 0)


# -- signed heads ----------------------------------------------------------------------


def _frontier(conn: Connection, store: StoreCore, size: int) -> tuple[MerkleFrontier, str] | None:
    """The tree's frontier at ``size`` entries and the chain hash of entry ``size``:
    this process's frontier, extended by the entries since (rebuilt when the ledger
    no longer continues it); None when an entry is missing."""
    kept = store.ledger_timing.frontier
    start = 0 if kept is None or kept[0].count > size else kept[0].count
    rows = conn.execute(
        select(ledger.c.seq, ledger.c.run_id, ledger.c.last_seq, ledger.c.head, ledger.c.hash)
        .where(ledger.c.seq >= max(start, 1), ledger.c.seq <= size)
        .order_by(ledger.c.seq)
    ).all()
    frontier, chain = MerkleFrontier(), GENESIS
    if kept is not None and start > 0:
        if not rows or rows[0].seq != start or rows[0].hash != kept[1]:
            store.ledger_timing.frontier = None  # rewritten under it: start again
            return _frontier(conn, store, size)
        rows = rows[1:]
        frontier, chain = MerkleFrontier(kept[0].count, list(kept[0].nodes)), kept[1]
    for expected, row in enumerate(rows, frontier.count + 1):
        if row.seq != expected:
            return None
    frontier.extend(
        [leaf_hash(entry_message(r.seq, r.run_id, r.last_seq, r.head).encode()) for r in rows]
    )
    return frontier, rows[-1].hash if rows else chain


def _sign(
    conn: Connection, store: StoreCore, signer: Signer, size: int, digest: str
) -> tuple[MerkleFrontier, str] | None:
    """Sign the tree head of the first ``size`` entries and keep it, in the pass's
    transaction; the frontier it extended (this process's once the pass commits)."""
    frontier = _frontier(conn, store, size)
    if frontier is None or frontier[1] != digest:
        log.warning("ledger sequencer: an entry is missing below %d, head not signed", size)
        return None
    root = frontier[0].root()
    kept = stored_statement(conn, "ledger_head", str(size), signer.key_id)
    if kept is None:
        statement: dict[str, Any] = {
            "type": HEAD_TYPE,
            "size": size,
            "root": root,
            "ts": int(store.ledger_timing.clock()),
        }
        keyed = keyed_as(store)
        if keyed is not None:  # as audit.ledger._tree.signed_head: a keyed store says so
            statement["keyed"] = keyed
        keep_statement(conn, "ledger_head", str(size), signer.sign(statement))
    elif kept.get("root") != root:
        log.warning("ledger sequencer: a head signed at size %d has another root", size)
    return frontier
