"""Gate deadlines: a pending gate past ``expires_at`` is decided ``expired`` with its
``on_timeout`` decision (compare-and-set) and its run resumed, exactly once, by
whatever process applies the deadlines on time (``converge serve``, a worker,
``converge gates --expire`` run by cron) or the first time anyone decides or
resumes it. Listing gates only lists."""

from __future__ import annotations

import time
from collections.abc import Callable

from audit.ledger import require_key
from audit.queries import read_gates
from audit.store import SqlRunStore
from converge.decisions._policy import job_of_run
from converge.decisions._resume import Execute, executor_for
from converge.run_queue import RunQueue
from engine import ConvergeError, GateAlreadyDecided, GateDecision, GateRecord, RunResult
from engine.status import GateStatus

Clock = Callable[[], float]
"""Unix time in seconds (``time.time``); tests inject another to pass a deadline."""


def is_expired(gate: GateRecord, now: float | None = None) -> bool:
    """True when a pending ``gate`` is past its deadline (``expires_at``, unix seconds)."""
    at = time.time() if now is None else now
    return (
        gate.status == GateStatus.PENDING and gate.expires_at is not None and at > gate.expires_at
    )


def apply_expiry(
    store: SqlRunStore,
    gate: GateRecord,
    execute: Execute | None = None,
    *,
    resume: bool = True,
    queue: RunQueue | None = None,
) -> RunResult | None:
    """Decide an expired gate by its ``on_timeout`` and resume its run, exactly once.

    Returns the run's next stop when this caller won the compare-and-set and the
    run recorded a job; None when another caller expired it first, the run cannot
    be resumed here, or another process claimed it first (the gate is expired all
    the same). With ``resume=False`` only the gate is decided: the caller resumes
    the run itself (``converge resume RUN``, with its own budget); with ``queue``
    the resume is sent there. Raises ``AuditKeyError`` (a keyed store without its key).
    """
    timeout = GateDecision(
        approved=gate.on_timeout == "approve", by="timeout", reason="gate expired"
    )
    require_key(store, f"expiring gate {gate.gate_id}")
    try:
        store.decide_gate(gate.gate_id, timeout, GateStatus.EXPIRED)
    except GateAlreadyDecided:
        return None
    if not resume:
        return None
    if queue is not None:
        queue.send(gate.run_id, "resume")
        return None
    try:
        job = job_of_run(store, gate.run_id)
        run = execute or executor_for(store)
        return run(job, lambda engine: engine.resume_run(gate.run_id))
    except ConvergeError:
        # recorded as expired; `converge resume RUN` applies it later
        return None


def expire_due(
    store: SqlRunStore,
    execute: Execute | None = None,
    clock: Clock = time.time,
    *,
    defer: str | None = None,
    queue: RunQueue | None = None,
) -> list[str]:
    """Apply every pending gate's deadline that passed; the ids of the gates expired
    now. The gates of run ``defer`` are decided but its run is not resumed here;
    with ``queue`` the runs are resumed there (see :func:`apply_expiry`)."""
    now = clock()
    done: list[str] = []
    require_key(store, "applying gate deadlines")
    for gate in read_gates(store, pending=True):
        # a gate that cannot be read is listed as such, not decided by its deadline
        if isinstance(gate, GateRecord) and is_expired(gate, now):
            apply_expiry(store, gate, execute, resume=gate.run_id != defer, queue=queue)
            done.append(gate.gate_id)
    return done
