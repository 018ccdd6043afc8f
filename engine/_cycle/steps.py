"""The drivers that walk a cycle's steps to the run's stop (docs/concepts.md).

Each step's ``run(cycle)`` does its part of a cycle and returns the next step, as
the nodes of pydantic-ai's agent graph do; :class:`~engine._cycle.cycling.End`
carries the run's result (a stop or a pause). ``cycle`` is the
:class:`~engine._cycle.cycling.Cycling` of this leg: the engine's settings, the
:class:`~engine._cycle.run.Run` and what the driver keeps between cycles (the
collector freeze, an event loop for async suggestors).

``Prelude`` (checks, eligible suggestors; :mod:`engine._cycle.scheduling`) →
``Execute`` (run them; :mod:`engine._cycle.execution`) → ``Collect`` (outcomes
into effects; :mod:`engine._cycle.collection`) → ``Merge`` (a gate's decision,
then proposals into facts; a gate that matches pauses; :mod:`engine._cycle.merge`)
→ ``Judge`` (invariants, budgets, policies, criteria: the stop, or
``NEXT_CYCLE``; :mod:`engine._cycle.judgement`). On an engine with no executor,
store, gate or HITL policy, :class:`PlainCycles` runs those same steps fused into
one loop for plain outcomes (the hot path of a chain of plain
suggestors, :mod:`engine._cycle.plain`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

from engine._cycle.accounting import remaining_budget
from engine._cycle.collection import Collect
from engine._cycle.collector import CollectorFreeze
from engine._cycle.cycling import NEXT_CYCLE, Cycling, End
from engine._cycle.execution import Execute
from engine._cycle.merge import MERGE
from engine._cycle.plain import plain_engine, run_plain
from engine._cycle.run import Run
from engine._cycle.scheduling import PRELUDE
from engine.result import RunResult
from engine.settings import EngineSettings

__all__ = ["PLAIN", "PlainCycles", "Walk", "drive_async", "drive_sync"]


class PlainCycles:
    """Cycles fused into one loop for plain outcomes (:func:`run_plain`); it hands
    back to ``Prelude`` when a cycle needs the general steps."""

    __slots__ = ()

    def run(self, cycle: Cycling) -> Any:
        """Plain cycles to the stop, or the general step that takes over."""
        done = run_plain(cycle.settings, cycle.run, cycle.freezer, Walk(cycle))
        return PRELUDE if done is None else End(done)


PLAIN = PlainCycles()


@dataclass(slots=True)
class Walk:
    """The general steps the plain loop hands a cycle to
    (:class:`engine._cycle.plain.GeneralSteps`): each walks ``cycle`` to the end of
    that cycle and returns the run's result, or None when it goes on."""

    cycle: Cycling

    def from_prelude(self) -> RunResult | None:
        """Walk a whole cycle."""
        return self.walk(PRELUDE)

    def from_collect(self, eligible: list[int], outcomes: list[Any]) -> RunResult | None:
        """Walk the cycle on from the collection of ``outcomes``."""
        return self.walk(Collect(eligible, outcomes))

    def from_merge(self) -> RunResult | None:
        """Walk the cycle on from its merge."""
        return self.walk(MERGE)

    def walk(self, step: Any) -> RunResult | None:
        """Walk from ``step`` to the end of the cycle."""
        while True:
            step = step.run(self.cycle)
            if step is NEXT_CYCLE:
                return None
            if type(step) is End:
                result: RunResult = step.result
                return result


def drive_sync(settings: EngineSettings, run: Run) -> RunResult:
    """Walk the steps to the run's stop on this thread (async suggestors on a
    private event loop): from the merge a paused run (or a cut merge) left, else
    from a cycle, the plain loop's when it can take it."""
    plain = plain_engine(settings)
    run.facts.remaining = partial(remaining_budget, settings, run)
    run.facts.suggestors = settings.registry.names  # (Context.suggestors)
    # what a dead process recorded of the cycles a recovery runs again (no call here:
    # a leg's path through the engine stays as short, tests/test_resume_path.py)
    recovery = run.recovery
    run.facts.replayed = recovery.execution if recovery.recorded_executions else None
    paused = run.gating.pending_gate is not None
    step: Any = MERGE if paused or run.cursor.merge_effects else NEXT_CYCLE
    cycle = Cycling(settings, run, CollectorFreeze(adopt=run.recovery.take_frozen()), plain)
    registry = settings.registry
    try:
        while True:
            if step is NEXT_CYCLE:
                # the plain loop takes the next cycle when it can (no async, no work cut)
                fused = plain and not registry.any_async and not run.cursor.cut
                step = PLAIN if fused else PRELUDE
            step = step.run(cycle)
            if type(step) is End:
                result: RunResult = step.result
                return result
    finally:
        cycle.freezer.release()
        if cycle.runner is not None:
            cycle.runner.close()
        settings.runs.leave(run.run_id)


async def drive_async(settings: EngineSettings, run: Run) -> RunResult:
    """Walk the steps to the run's stop inside the caller's event loop (never the
    plain loop)."""
    run.facts.remaining = partial(remaining_budget, settings, run)
    run.facts.suggestors = settings.registry.names  # as drive_sync's
    recovery = run.recovery
    run.facts.replayed = recovery.execution if recovery.recorded_executions else None
    paused = run.gating.pending_gate is not None
    step: Any = MERGE if paused or run.cursor.merge_effects else PRELUDE
    cycle = Cycling(settings, run, CollectorFreeze(adopt=run.recovery.take_frozen()))
    try:
        while True:
            if step is NEXT_CYCLE:
                step = PRELUDE
            if type(step) is Execute:
                step = await step.arun(cycle)
            else:
                step = step.run(cycle)
            if type(step) is End:
                result: RunResult = step.result
                return result
    finally:
        cycle.freezer.release()
        settings.runs.leave(run.run_id)
