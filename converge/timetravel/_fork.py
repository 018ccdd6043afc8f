"""Forking a recorded run from the application: ``converge fork``, the inbox's fork
form and ``POST /api/runs/{id}/fork`` all come here.

The fork runs the job its parent recorded (or another one), under that job's
budget with the changes asked for laid over it (totals, as in any run: the cycles
and facts taken from the parent count), through ``Engine.fork``; the person who
forked it is recorded with the new run (``audit.people._people.record_actor``, action
``forked``), so that a four-eyes gate of the fork refuses them as its decider.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any

from audit.people import record_actor
from audit.store import SqlRunStore
from converge.decisions import job_of_run
from converge.jobs import Job
from converge.jobs.models import ModelChoice
from engine import Budget, ConvergeError, Engine, RunResult

__all__ = ["BUDGET_FIELDS", "fork_budget", "fork_run", "record_fork"]

BUDGET_FIELDS = (
    "max_cycles",
    "max_facts",
    "max_tokens",
    "max_seconds",
    "max_cost_usd",
    "max_invocations",
)
"""The budget limits a fork may change (``engine.Budget`` fields)."""


def fork_budget(job: Job, changes: Mapping[str, Any]) -> Budget:
    """``job``'s budget with ``changes`` (``engine.Budget`` fields, None ones left
    out) laid over it. Raises ``pydantic.ValidationError`` for a bad value."""
    given = {k: v for k, v in changes.items() if v is not None}
    return Budget.model_validate({**job.spec.budget.model_dump(), **given})


def fork_run(
    store: SqlRunStore,
    run_id: str,
    cycle: int,
    *,
    job: Job | None = None,
    changes: Mapping[str, Any] | None = None,
    by: str | None = None,
    prepare: Callable[[Engine], None] | None = None,
) -> RunResult:
    """Fork run ``run_id`` at ``cycle`` and drive the fork to its stop.

    ``job``: None runs the job the parent recorded; ``changes``: budget limits over
    that job's budget (:data:`BUDGET_FIELDS`); ``by``: who forked it (recorded with
    the fork); ``prepare``: called with the engine before it forks (progress,
    cancel on signals). Returns the fork's result (its ``run_id`` is the new run).
    Raises ``RunNotFound``, ``engine.fork.ForkError`` (a cycle the store cannot
    rebuild; ``UnverifiedParent``: the parent's chain fails up to ``cycle``, nothing
    recorded), ``ConvergeError`` (the parent recorded no job, a reference of the job
    no longer imports) and ``pydantic.ValidationError`` (a bad budget value).
    """
    engine, budget = _forking(store, run_id, job, changes)
    if prepare is not None:
        prepare(engine)
    result = engine.fork(run_id, cycle, budget)
    _record_forker(store, result.run_id, by)
    return result


def record_fork(
    store: SqlRunStore,
    run_id: str,
    cycle: int,
    job: Job | None = None,
    changes: Mapping[str, Any] | None = None,
    by: str | None = None,
) -> str:
    """Record a fork of run ``run_id`` at ``cycle`` without driving it; the new run id.

    As :func:`fork_run`, but the fork is left ``queued`` with a checkpoint at the
    fork point (``Engine.record_fork``): ``converge.service.execute_run(store,
    new_id)`` (a worker) drives it to the stop :func:`fork_run` would reach. The
    parent's chain is verified first: nothing is recorded for a parent that fails.
    Raises as :func:`fork_run` (``engine.errors.UnverifiedParent`` among the
    ``ForkError``), and ``StoreError``.
    """
    engine, budget = _forking(store, run_id, job, changes)
    new_id = engine.record_fork(run_id, cycle, budget)
    _record_forker(store, new_id, by)
    return new_id


def _forking(
    store: SqlRunStore, run_id: str, job: Job | None, changes: Mapping[str, Any] | None
) -> tuple[Engine, Budget]:
    """The engine of the fork's job (the parent's recorded one when None) and its budget."""
    if job is None:
        job = job_of_run(store, run_id)
    # a fork is a new run: $CONVERGE_MODEL, when set, is its agents' model (recorded
    # with it), else the parent's recorded one (converge.jobs.models)
    job.model_choice = ModelChoice(job.model_choice.model, allow_change=True)
    return job.build_engine(store), fork_budget(job, changes or {})


def _record_forker(store: SqlRunStore, run_id: str, by: str | None) -> None:
    if by is not None:
        # the fork itself is recorded; a failure here only loses the name for four eyes
        with contextlib.suppress(ConvergeError):
            record_actor(store, run_id, by, "forked")
