"""HITL gates: a run paused on one, its compare-and-set decision (chained as a
``gate_decided`` event in the same transaction), and the claim of the run that a
resume makes. Quorum votes on a gate are in :mod:`audit.approvals`."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from sqlalchemy import insert, select, update

from audit.checkpoints import put_checkpoint
from audit.core import StoreCore, json_compact
from audit.events import append, append_checkpointed
from audit.queries import this_writer, writer_alive
from audit.runs import outcome_values
from audit.tables import gates, runs
from engine.errors import GateAlreadyDecided, GateNotFound, RunBusy, RunNotFound, StoreError
from engine.hitl import GateDecision
from engine.store import AuditEvent, BatchItem, GateRecord, RunOutcome

_DECIDED = ("approved", "rejected", "expired")


def _iso(ts: float | None) -> str | None:
    return None if ts is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def pause_run(
    store: StoreCore,
    run_id: str,
    events: Sequence[BatchItem],
    outcome: RunOutcome,
    gate: GateRecord,
    checkpoint: dict[str, Any],
) -> None:
    """Write the events, the pending gate, the checkpoint and the ``paused``
    outcome, in one transaction."""
    store._written(run_id)
    with store._tx() as conn:
        blob = append_checkpointed(store, conn, run_id, events, checkpoint)
        conn.execute(
            insert(gates).values(
                gate_id=gate.gate_id,
                run_id=gate.run_id,
                proposal_id=gate.proposal_id,
                proposal=json_compact(gate.proposal),
                suggestor=gate.suggestor,
                summary=gate.summary,
                cycle=gate.cycle,
                policy=gate.policy,
                status=gate.status,
                opened_at=gate.opened_at or time.time(),
                expires_at=gate.expires_at,
                on_timeout=gate.on_timeout,
                decided_by=gate.decided_by,
                decided_at=gate.decided_at,
                reason=gate.reason,
                extra=json_compact(gate.extra),
            )
        )
        put_checkpoint(store, conn, run_id, checkpoint, blob)
        conn.execute(update(runs).where(runs.c.run_id == run_id).values(**outcome_values(outcome)))


def get_gate(store: StoreCore, gate_id: str) -> GateRecord:
    """The gate (raises ``GateNotFound``)."""
    with store._tx(write=False) as conn:
        row = conn.execute(select(gates).where(gates.c.gate_id == gate_id)).one_or_none()
    if row is None:
        raise GateNotFound(f"no gate {gate_id!r} in audit store {store.shown}")
    return gate_record(row._mapping)


def list_gates(store: StoreCore, pending: bool = False) -> list[GateRecord]:
    """HITL gates, newest first (only ``pending`` ones when asked)."""
    q = select(gates)
    if pending:
        q = q.where(gates.c.status == "pending")
    q = q.order_by(gates.c.opened_at.desc(), gates.c.gate_id.desc())
    with store._tx(write=False) as conn:
        return [gate_record(r._mapping) for r in conn.execute(q)]


def decide_gate(store: StoreCore, gate_id: str, decision: GateDecision, status: str) -> GateRecord:
    """Compare-and-set the gate from ``pending`` to ``status`` and chain the decision
    as a ``gate_decided`` event, in one transaction; ``GateAlreadyDecided`` for the
    callers that lose, ``GateNotFound`` for an unknown gate."""
    if status not in _DECIDED:
        raise StoreError(f"gate status must be one of {_DECIDED}, got {status!r}")
    now = time.time()
    with store._tx() as conn:
        done = conn.execute(
            update(gates)
            .where(gates.c.gate_id == gate_id, gates.c.status == "pending")
            .values(status=status, decided_by=decision.by, decided_at=now, reason=decision.reason)
        )
        row = conn.execute(select(gates).where(gates.c.gate_id == gate_id)).one_or_none()
        if done.rowcount == 1 and row is not None:
            # the decision enters the run's chain in the compare-and-set's transaction
            decided = AuditEvent(
                "gate_decided",
                row.cycle,
                {
                    "gate_id": gate_id,
                    "approved": decision.approved,
                    "status": status,
                    "by": decision.by,
                    "reason": decision.reason,
                    "decided_at": now,
                    **({"value": decision.value} if decision.value is not None else {}),
                },
                now,
            )
            append(store, conn, row.run_id, [decided])
    if row is None:
        raise GateNotFound(f"no gate {gate_id!r} in audit store {store.shown}")
    rec = gate_record(row._mapping)
    if done.rowcount == 0:
        raise GateAlreadyDecided(gate_id, rec.status, rec.decided_by, _iso(rec.decided_at))
    return rec


def claim_resume(store: StoreCore, run_id: str) -> None:
    """Compare-and-set the run from paused/stopped (or dead-writer running) to
    ``running`` by this process; ``RunBusy`` / ``RunNotFound`` if not."""
    pid, host = this_writer()
    with store._tx() as conn:
        done = conn.execute(
            update(runs)
            .where(runs.c.run_id == run_id, runs.c.status.in_(("paused", "stopped")))
            .values(status="running", pid=pid, hostname=host)
        )
        if done.rowcount == 0:
            row = conn.execute(
                select(runs.c.status, runs.c.pid, runs.c.hostname).where(runs.c.run_id == run_id)
            ).one_or_none()
            if row is None:
                raise RunNotFound(f"no run {run_id!r} in audit store {store.shown}")
            if row.status == "running" and not writer_alive(row.pid, row.hostname):
                # its writer died (kill -9): take the run over, compare-and-set on the pid
                taken = conn.execute(
                    update(runs)
                    .where(
                        runs.c.run_id == run_id,
                        runs.c.status == "running",
                        runs.c.pid == row.pid,
                        runs.c.hostname == row.hostname,
                    )
                    .values(pid=pid, hostname=host)
                )
                if taken.rowcount == 1:
                    return
            raise RunBusy(f"run {run_id} is {row.status}: another process is resuming it")


def gate_record(m: Any) -> GateRecord:
    """A ``gates`` row (its mapping) as a :class:`engine.store.GateRecord`."""
    return GateRecord(
        gate_id=m["gate_id"],
        run_id=m["run_id"],
        proposal_id=m["proposal_id"],
        proposal=json.loads(m["proposal"]),
        suggestor=m["suggestor"],
        summary=m["summary"],
        cycle=m["cycle"],
        policy=m["policy"],
        status=m["status"],
        opened_at=m["opened_at"],
        expires_at=m["expires_at"],
        on_timeout=m["on_timeout"],
        decided_by=m["decided_by"],
        decided_at=m["decided_at"],
        reason=m["reason"],
        extra=json.loads(m["extra"]) if m["extra"] else {},
    )
