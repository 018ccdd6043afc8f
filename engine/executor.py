"""Executors: where a cycle's executions happen (docs/architecture.md and docs/scale-out.md).

The cycle hands an :class:`Executor` the suggestors admitted this cycle, in
registration order, and gets one *outcome* per suggestor back: what it returned
(an ``Effect`` or a list of ``Proposal``), the exception it raised, or a marker
(:data:`TIMED_OUT`, :data:`CANCELLED`). The engine stays the single merger: the
outcomes are collected and merged in registration order whatever order the
executions finished in, so the facts and the audit trail do not depend on where
they ran. ``Engine(executor=None)`` (the default) executes in-process: sync
suggestors on the caller's thread (the fast path), async ones concurrently.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from engine.context import Context
from engine.suggestor import Suggestor

__all__ = ["CANCELLED", "NOT_DONE", "TIMED_OUT", "CycleWork", "Executor", "Marker"]


class Marker:
    """The outcome of an execution that did not finish."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<{self.name}>"


TIMED_OUT = Marker("timed out")  # cut at the time budget → TimeBudgetExhausted
CANCELLED = Marker("cancelled")  # cut by Engine.cancel() → UserCancelled
NOT_DONE = Marker("not done")


@dataclass(frozen=True, slots=True)
class CycleWork:
    """One cycle's executions, as handed to an :class:`Executor`.

    ``run_id`` and ``cycle`` (1-based) name the cycle; ``context`` is the run's
    context (read-only; ``context.cycle == cycle``); ``suggestors`` are the admitted
    suggestors in registration order; ``remaining_s`` is what is left of the run's
    time budget in seconds (None = unlimited); ``stop_on_error`` is true for
    ``on_error="stop"`` (outcomes after the first failure are not merged);
    ``is_cancelled()`` turns true once ``Engine.cancel()`` was called for the run.
    """

    run_id: str
    cycle: int
    context: Context
    suggestors: Sequence[Suggestor]
    remaining_s: float | None
    stop_on_error: bool
    is_cancelled: Callable[[], bool]


@runtime_checkable
class Executor(Protocol):
    """Runs one cycle's executions somewhere and hands back their outcomes.

    ``execute(work)`` blocks until every execution of ``work`` has an outcome and
    returns them in the order of ``work.suggestors``: the value returned (``Effect``
    or list of ``Proposal``), the exception raised (``StopRun`` included), or
    :data:`TIMED_OUT` once ``work.remaining_s`` has passed, :data:`CANCELLED` once
    ``work.is_cancelled()``; work cut that way must be stopped where it runs.
    Raises :class:`engine.errors.ExecutorUnavailable` when the executions cannot be
    dispatched or their results cannot be read (the run stops with
    ``Error(error_category="external")``), :class:`engine.errors.ConfigurationError`
    when a suggestor cannot be shipped (``Error(error_category="configuration")``);
    either way the facts promoted before are kept.
    """

    def execute(self, work: CycleWork) -> list[Any]: ...
