"""A worker's store made ready before its first run: :func:`warm_store`.

The first run a worker process executes would otherwise pay for what its store
does once: the run service's tables checked (created on first use), and on
PostgreSQL each new backend loading the catalog entries of every table and index
its statements touch. Measured with approvals answered beside busy workers
(docs/performance.md): a
worker process's first resume took 270-780 ms against ~100 ms for the next ones
on a busy 2-core machine, and that burst, ten processes at once, is what the
approvals answered beside them waited for.
"""

from __future__ import annotations

from contextlib import ExitStack

from sqlalchemy import Connection, Table, select

from audit.run_queue._queue import ensure_service_tables
from audit.store import SqlRunStore
from audit.tables import (
    audit_events,
    checkpoint_parts,
    checkpoints,
    fact_chunks,
    gates,
    ledger_pending,
    meta,
    run_cancels,
    runs,
)

RUN_TABLES: tuple[Table, ...] = (
    runs,
    gates,
    audit_events,
    checkpoints,
    checkpoint_parts,
    fact_chunks,
    ledger_pending,
    meta,
    run_cancels,
)
"""The tables a run's start, resume and stop read or write."""


def warm_store(store: SqlRunStore, connections: int = 2) -> None:
    """Check the run service's tables, then open ``connections`` pooled connections
    at once (one on SQLite) and plan a read of every table of :data:`RUN_TABLES` on
    each: the first run does not wait for them. Raises ``StoreError``."""
    ensure_service_tables(store)
    count = max(1, connections if store.is_postgres else 1)
    with ExitStack() as stack:
        opened: list[Connection] = [
            stack.enter_context(store.transaction(write=False)) for _ in range(count)
        ]
        for conn in opened:
            for table in RUN_TABLES:
                conn.execute(select(table).limit(0)).all()
