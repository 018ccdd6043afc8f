"""A small commit on PostgreSQL in one statement and one round trip: the run's head moved
by a compare-and-set against the head this process last wrote (docs/audit.md, "Writes,
concurrency and crashes").

The locking write (:func:`audit.trail._events.append`) takes eight round trips for one
cycle: ``BEGIN``, ``SELECT ... FOR UPDATE`` of the run's row, the fact chunk's
``INSERT``, the ``COPY`` of its events (two), the ``UPDATE`` of the head, the
``INSERT`` into ``ledger_pending``, ``COMMIT``. When this process knows the head it
left (``StoreCore.run_heads``, kept by :func:`audit.trail._events.move_head`),
:func:`append_known` chains the batch after it and sends one statement, run
alone (autocommit: one transaction): an ``UPDATE`` of the run's row where its
head hash, last seq, facts count and fencing epoch are still the ones predicted,
and, in the same statement, only if that row was updated, the inserts of the
events, the fact chunk and the pending ledger head. A row that moved (another
writer, a superseding claim, a transaction of this process that rolled back) or
is gone updates nothing and inserts nothing: the caller falls back to the
locking write, which chains the batch again or raises ``RunSuperseded`` /
``RunNotFound``. Under ``READ COMMITTED`` the ``UPDATE`` waits for a writer
holding the row and checks its conditions again on the row that writer left, so
two writers never both move the same head.

Only with a pending ledger (the sequencer, PostgreSQL's default): integrating
inline locks the ledger head and stays on the locking write, as does SQLite.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from audit.core import StoreCore
from audit.tables import audit_events, fact_chunks, ledger_pending, runs
from audit.testing import after_write_commit
from audit.writing import ChainedBatch, chain_batch
from engine.errors import StoreError
from engine.store import BatchItem

__all__ = ["append_known"]

_STATEMENT = f"""WITH moved AS (
  UPDATE {runs.name} SET head_hash = %(head)s, last_seq = %(seq)s,
    cycles = GREATEST(cycles, %(top)s), facts_count = %(facts)s
  WHERE run_id = %(run)s AND head_hash = %(prev)s AND last_seq = %(prev_seq)s
    AND facts_count = %(prev_facts)s AND (%(epoch)s::int IS NULL OR epoch = %(epoch)s::int)
  RETURNING run_id
), events AS (
  INSERT INTO {audit_events.name} (run_id, seq, cycle, kind, ts, payload, hash, fact_id)
  SELECT moved.run_id, e.seq, e.cycle, e.kind, e.ts, e.payload, e.hash, e.fact_id
  FROM moved, <rows> AS e(seq, cycle, kind, ts, payload, hash, fact_id)
), chunk AS (
  INSERT INTO {fact_chunks.name} (run_id, first, count, data, digest)
  SELECT moved.run_id, %(prev_facts)s, %(chunk_count)s, %(chunk)s, %(digest)s
  FROM moved WHERE %(chunk)s::text IS NOT NULL
), pending AS (
  INSERT INTO {ledger_pending.name} (run_id, last_seq, head, committed_at)
  SELECT moved.run_id, %(seq)s, %(head)s, %(at)s FROM moved
)
SELECT count(*) FROM moved"""
"""The commit of one batch: the head moved, if still the predicted one, with the
batch's rows (``<rows>``: :func:`_sql`), its fact chunk and its pending ledger head."""

SCALAR_ROWS = 8
"""Batches of up to this many rows send each value as a parameter of its own (one
statement per row count, each prepared by psycopg once it ran a few times); larger
ones one binary array per column (no escaping, one statement)."""

_COLUMNS = ("seq", "cycle", "kind", "ts", "payload", "hash", "fact_id")
_CASTS = ("int", "int", "text", "float8", "text", "text", "text")


@cache
def _sql(rows: int) -> str:
    """The statement for a batch of ``rows`` rows (0: the arrays' one)."""
    if rows == 0:
        arrays = ", ".join(f"%(a_{c})b::{t}[]" for c, t in zip(_COLUMNS, _CASTS, strict=True))
        return _STATEMENT.replace("<rows>", f"unnest({arrays})")
    values = ", ".join(
        "(" + ", ".join(f"%(r{i}_{c})s::{t}" for c, t in zip(_COLUMNS, _CASTS, strict=True)) + ")"
        for i in range(rows)
    )
    return _STATEMENT.replace("<rows>", f"(VALUES {values})")


def append_known(store: StoreCore, run_id: str, events: Sequence[BatchItem]) -> bool:
    """Commit ``events`` chained after the head this process last wrote to the run, in
    one statement; False (nothing written) when that does not apply (SQLite, an
    inline ledger, no known head, a refused claim) or the run's row no longer holds
    that head: the caller then takes the locking write. ``StoreError`` when the
    database fails (nothing written)."""
    if not store.is_postgres or store.ledger_timing.inline:
        return False
    known = store.run_heads.get(run_id)
    epoch = store.claim_epochs.get(run_id)
    if known is None or epoch == -1:
        return False
    prev, prev_seq, facts = known
    batch = chain_batch(run_id, events, prev, prev_seq, store.key)
    if not len(batch):
        return False
    sql, params = _params(batch, prev, prev_seq, facts, epoch, store.ledger_timing.clock())
    try:
        moved = _execute(store, sql, params)
    except StoreError:
        store.run_heads.pop(run_id, None)
        raise
    if moved != 1:
        store.run_heads.pop(run_id, None)
        return False
    store.run_heads[run_id] = (batch.head, batch.seq, facts + batch.promoted)
    after_write_commit()
    store.heads.recorded(store, run_id, batch.seq, batch.head)
    return True


def _execute(store: StoreCore, sql: str, params: dict[str, Any]) -> int:
    """Run the statement alone (autocommit: its own transaction, no ``BEGIN`` nor
    ``COMMIT`` round trip) on a pooled connection; the rows it moved (0 or 1)."""
    dbapi_error = store.sql_engine.dialect.loaded_dbapi.Error
    try:
        raw = store.sql_engine.raw_connection()
    except SQLAlchemyError as exc:
        raise StoreError(f"audit store {store.shown}: {getattr(exc, 'orig', None) or exc}") from exc
    try:
        driver: Any = raw.driver_connection
        driver.autocommit = True
        try:
            return int(driver.execute(sql, params).fetchone()[0])
        finally:
            if not driver.closed:
                driver.autocommit = False
    except dbapi_error as exc:
        if raw.driver_connection is None or raw.driver_connection.closed:
            raw.invalidate()
        raise StoreError(f"audit store {store.shown}: {exc}".strip()) from exc
    finally:
        raw.close()


def _params(
    batch: ChainedBatch, prev: str, prev_seq: int, facts: int, epoch: int | None, at: float
) -> tuple[str, dict[str, Any]]:
    """The statement for ``batch`` and its parameters."""
    rows = [r[1:] for r in batch.event_rows()]  # the run id comes from the moved row
    chunk = digest = None
    if batch.chunk:
        chunk, digest = batch.chunk_row()
    params: dict[str, Any] = {
        "run": batch.run_id,
        "prev": prev,
        "prev_seq": prev_seq,
        "prev_facts": facts,
        "epoch": epoch,
        "head": batch.head,
        "seq": batch.seq,
        "top": batch.top,
        "facts": facts + batch.promoted,
        "chunk": chunk,
        "chunk_count": len(batch.chunk),
        "digest": digest,
        "at": at,
    }
    if len(rows) > SCALAR_ROWS:
        for c, values in zip(_COLUMNS, zip(*rows, strict=True), strict=True):
            params[f"a_{c}"] = list(values)
        return _sql(0), params
    for i, row in enumerate(rows):
        for c, value in zip(_COLUMNS, row, strict=True):
            params[f"r{i}_{c}"] = value
    return _sql(len(rows)), params
