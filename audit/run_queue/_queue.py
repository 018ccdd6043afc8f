"""Runs as a service, on the store's side: queued runs, their taking, cancel requests.

A submitted run is recorded ``queued`` (its header and job, no events yet) before
any message about it is sent, so nothing submitted is lost: a message lost with
its broker is found again by :func:`runs_to_recover`. A worker *takes* a queued run
with one compare-and-set (``queued`` → ``running`` by this process): of workers
handed the same run (a redelivered message) exactly one takes it; the engine's
``start_run`` then writes the run's first events on that row. A cancel request
is a row of ``run_cancels`` that the process running the run reads at each cycle
boundary (``converge cancel``). The table is created on first use, like the
inbox's, so a store of an earlier version gains it without a migration.
"""

from __future__ import annotations

import time

from sqlalchemy import delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from audit.core import json_compact
from audit.ledger import key_fingerprint
from audit.store import SqlRunStore
from audit.tables import SERVICE_TABLES, run_cancels, runs
from audit.trail import GENESIS, REQUEUED, append, locked_run_row
from audit.writing import (
    grant,
    read_lease,
    running_held,
    this_writer,
    with_leases,
    writer_alive,
)
from engine.errors import RunBusy, StoreError
from engine.run_ids import check_run_id
from engine.status import RunStatus
from engine.store import AuditEvent, RunHeader


def ensure_service_tables(store: SqlRunStore) -> None:
    """Create the run service's tables that are missing (once per store object)."""
    store.ensure_tables(SERVICE_TABLES, 714524)


def queue_run(store: SqlRunStore, header: RunHeader) -> None:
    """Record a submitted run as ``queued``: its header and job, no events.

    ``header.started_at`` is when it was submitted (unix seconds); the chain starts
    when a worker takes the run. Raises ``InvalidRunId`` (nothing written) for an
    id that is no run id (``engine.run_ids``), ``StoreError`` when the run id exists
    or the store refuses the write (wrong key included).
    """
    check_run_id(header.run_id, "run_id")
    if store.key is not None and store.known_fingerprint not in (None, key_fingerprint(store.key)):
        raise StoreError(f"audit store {store.shown}: wrong key (not the key it was written with)")
    try:
        spec = None if header.job_spec is None else json_compact(header.job_spec)
        with store.transaction() as conn:
            conn.execute(
                insert(runs).values(
                    run_id=header.run_id,
                    job=header.job,
                    job_spec=spec,
                    suggestors=json_compact(list(header.suggestors)),
                    status=RunStatus.QUEUED,
                    started_at=header.started_at,
                    cycles=0,
                    facts_count=0,
                    chain=store.chain_kind,
                    head_hash=GENESIS,
                    last_seq=0,
                    parent_run_id=header.parent_run_id,
                )
            )
    except StoreError as exc:
        if isinstance(exc.__cause__, IntegrityError):
            raise StoreError(f"run {header.run_id!r} already exists in {store.shown}") from exc
        raise
    except (TypeError, ValueError) as exc:
        raise StoreError(f"job spec of run {header.run_id} is not JSON: {exc}") from exc


_TAKE_READS = tuple(runs.c[c] for c in ["status", "pid", "hostname", "last_seq", "epoch"])
"""The columns of its run a take reads (and locks)."""


def take_queued(store: SqlRunStore, run_id: str) -> None:
    """Take a queued run for this process (``queued`` → ``running``, this pid).

    A run left ``running`` with no event by a taker that died or whose lease expired
    (between the take and its first write) is taken again. The run's lease is this
    process's (:mod:`audit.writing._lease`). Raises ``RunBusy`` when another process took
    it, ``RunNotFound``.
    """
    pid, host = this_writer()
    with store.transaction() as conn:
        row = locked_run_row(store, conn, run_id, *_TAKE_READS)
        lease = read_lease(conn, run_id)
        orphan = row.status == RunStatus.RUNNING and row.last_seq == 0
        held = lease.held if lease is not None else writer_alive(row.pid, row.hostname)
        if row.status != RunStatus.QUEUED and not (orphan and not held):
            raise RunBusy(f"run {run_id} is {row.status}: another process took it")
        done = conn.execute(
            update(runs)
            .where(runs.c.run_id == run_id, runs.c.status == row.status, runs.c.last_seq == 0)
            .values(status=RunStatus.RUNNING, pid=pid, hostname=host)
        )
        if done.rowcount != 1:
            raise RunBusy(f"run {run_id} was taken by another process first")
        grant(conn, run_id, row.epoch, store.leases.seconds, lease if orphan else None)
    store.taken_runs.add(run_id)
    store.leases.hold(run_id, row.epoch)


def requeue_stopped(store: SqlRunStore, run_id: str) -> bool:
    """Put back in the queue a run this process cancelled because it was itself
    stopping (a worker of ``converge serve``'s pool told to stop: ``UserCancelled``,
    checkpointed): ``stopped`` → ``queued`` with no writer and a chained
    ``run_requeued`` event (who put it back), in one transaction, its events kept;
    the next pool or ``converge worker --recover`` goes on from its checkpoint (as
    a recorded fork is started: ``converge.service.execute_run``). False (nothing
    changed) when the run is no longer as this process stopped it. Raises
    ``StoreError``."""
    pid, host = this_writer()
    with store.transaction() as conn:
        done = conn.execute(
            update(runs)
            .where(
                runs.c.run_id == run_id,
                runs.c.status == RunStatus.STOPPED,
                runs.c.stop_kind == "user_cancelled",
                runs.c.pid == pid,
                runs.c.hostname == host,
            )
            .values(status=RunStatus.QUEUED, pid=None, hostname=None)
        )
        if done.rowcount != 1:
            return False
        cycle = conn.execute(select(runs.c.cycles).where(runs.c.run_id == run_id)).scalar_one()
        why = {"reason": "its worker stopped", "worker": {"host": host, "pid": pid}}
        append(store, conn, run_id, [AuditEvent(REQUEUED, int(cycle), why, time.time())])
    return True


def request_cancel(store: SqlRunStore, run_id: str, by: str) -> str:
    """Ask whichever process runs ``run_id`` to cancel it; the run's status now.

    The run ends ``UserCancelled`` at its next cycle boundary (a queued run as soon
    as a worker starts it), its facts kept. Raises ``RunNotFound``, or
    ``RunBusy`` when the run is neither queued nor running (nothing to cancel).
    """
    status = store.run(run_id).status
    if status not in (RunStatus.QUEUED, RunStatus.RUNNING):
        raise RunBusy(f"run {run_id} is {status}: only a queued or running run can be cancelled")
    ensure_service_tables(store)
    with store.transaction() as conn:
        conn.execute(delete(run_cancels).where(run_cancels.c.run_id == run_id))
        conn.execute(
            insert(run_cancels).values(run_id=run_id, requested_by=by, requested_at=time.time())
        )
    return status


def cancel_requested(store: SqlRunStore, run_id: str) -> bool:
    """True when someone asked to cancel ``run_id`` and it has not ended since."""
    ensure_service_tables(store)
    with store.transaction(write=False) as conn:
        found = conn.execute(
            select(run_cancels.c.run_id).where(run_cancels.c.run_id == run_id)
        ).first()
    return found is not None


def clear_cancel(store: SqlRunStore, run_id: str) -> None:
    """Forget the cancel request of a run whose leg ended."""
    ensure_service_tables(store)
    with store.transaction() as conn:
        conn.execute(delete(run_cancels).where(run_cancels.c.run_id == run_id))


def runs_to_recover(store: SqlRunStore, *, queued: bool = True) -> list[tuple[str, str]]:
    """``(run_id, status)`` of the runs no process is executing, oldest first:
    ``queued`` ones (unless ``queued`` is false), and ``running`` ones whose lease
    expired by the database's clock or whose writer on this host is gone
    (``crashed``)."""
    found: list[tuple[str, str]] = []
    wanted = (RunStatus.QUEUED, RunStatus.RUNNING) if queued else (RunStatus.RUNNING,)
    q = select(runs.c.run_id, runs.c.status, runs.c.pid, runs.c.hostname)
    with store.transaction(write=False) as conn:
        rows = conn.execute(
            with_leases(q, store.is_postgres)
            .where(runs.c.status.in_(wanted))
            .order_by(runs.c.started_at)
        ).all()
    for r in rows:
        if r.status == RunStatus.QUEUED:
            found.append((r.run_id, RunStatus.QUEUED))
        elif not running_held(r.pid, r.hostname, r.lease_holder, r.lease_expires, r.db_now):
            found.append((r.run_id, RunStatus.CRASHED))
    return found
