"""After a decision: the run resumes in this process, from the job it recorded, or
its resume is sent to a queue (a worker, the server's pool)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from audit.people import Recorded
from audit.store import SqlRunStore
from converge.jobs import Job
from converge.run_queue import RunQueue
from engine import ConvergeError, Engine, GateExpired, RunResult

Execute = Callable[[Job, Callable[[Engine], RunResult]], RunResult]
"""How to build a job's engine and run one step of it (the CLI adds a progress bar)."""


def executor_for(store: SqlRunStore) -> Execute:
    """Build the job's engine on ``store`` and run ``step`` on it (no progress display)."""

    def execute(job: Job, step: Callable[[Engine], RunResult]) -> RunResult:
        return step(job.build_engine(store))

    return execute


def hand_over(
    store: SqlRunStore,
    recorded: Recorded,
    job: Job,
    *,
    execute: Execute | None = None,
    queue: RunQueue | None = None,
) -> RunResult | None:
    """Resume the run of a gate ``recorded`` decided: with ``queue``, send the resume
    there (the decision is already recorded; None at once); else resume it here,
    ``Engine.resume`` recording the decision: the run's next stop. None when a
    quorum is still short (nothing to resume).

    Raises what ``Engine.resume`` raises: ``GateAlreadyDecided``, ``ResumeError``,
    ``RunBusy``, ``GateExpired`` (the engine found the gate past its deadline and
    decided it so: the run is resumed with that decision first, when it can be).
    """
    final = recorded.decision
    if final is None:
        return None
    gate = recorded.gate
    if queue is not None:
        queue.send(gate.run_id, "resume")
        return None
    run = execute or executor_for(store)
    try:
        return run(job, lambda engine: engine.resume(gate.gate_id, final))
    except GateExpired:
        # if this fails, it stays recorded as expired; `converge resume RUN` applies it
        with contextlib.suppress(ConvergeError):
            run(job, lambda engine: engine.resume_run(gate.run_id))
        raise
