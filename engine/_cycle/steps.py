"""The drivers that walk a cycle's steps to the run's stop (docs/concepts.md).

Each step's ``run(cycle)`` does its part of a cycle and returns the next step, as
the nodes of pydantic-ai's agent graph do; :class:`~engine._cycle.cycling.End`
carries the run's result (a stop or a pause). ``cycle`` is the
:class:`~engine._cycle.cycling.Cycling` of this leg: the engine's settings, the
:class:`~engine._cycle.run.Run` and what the driver keeps between cycles (the
collector freeze, an event loop for async suggestors).

``Prelude`` (checks, eligible suggestors; :mod:`engine._cycle.prelude`) →
``Execute`` (run them; :mod:`engine._cycle.execute`) → ``Collect`` (outcomes
into effects; :mod:`engine._cycle.collect`) → ``Merge`` (a gate's decision,
then proposals into facts; a gate that matches pauses; :mod:`engine._cycle.merge`)
→ ``Judge`` (invariants, budgets, policies, criteria: the stop, or
``NEXT_CYCLE``; :mod:`engine._cycle.judge`). On an engine with no executor,
store, gate or HITL policy, :class:`PlainCycles` runs those same steps fused into
one loop for plain outcomes (the hot path of a chain of plain
suggestors, :mod:`engine._cycle.plain`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from engine._cycle.accounting import remaining_budget
from engine._cycle.collect import Collect, Outcome
from engine._cycle.collector import CollectorFreeze
from engine._cycle.cycling import NEXT_CYCLE, Cycling, End, NextCycle, Step
from engine._cycle.execute import Execute
from engine._cycle.merge import MERGE
from engine._cycle.plain import plain_engine, run_plain
from engine._cycle.prelude import PRELUDE, Prelude, next_step
from engine._cycle.run import Run
from engine.result import RunResult
from engine.settings import EngineSettings

__all__ = [
    "PLAIN",
    "PlainCycles",
    "Walk",
    "begin_leg",
    "drive_async",
    "drive_sync",
    "first_step",
]


class PlainCycles:
    """Cycles fused into one loop for plain outcomes (:func:`run_plain`); it hands
    back to ``Prelude`` when a cycle needs the general steps."""

    __slots__ = ()

    def run(self, cycle: Cycling) -> Prelude | End:
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

    def from_collect(self, eligible: list[int], outcomes: list[Outcome]) -> RunResult | None:
        """Walk the cycle on from the collection of ``outcomes``."""
        return self.walk(Collect(eligible, outcomes))

    def from_merge(self) -> RunResult | None:
        """Walk the cycle on from its merge."""
        return self.walk(MERGE)

    def walk(self, step: Step) -> RunResult | None:
        """Walk from ``step`` to the end of the cycle."""
        while True:
            answer = step.run(self.cycle)
            if isinstance(answer, NextCycle):
                return None
            if isinstance(answer, End):
                return answer.result
            step = answer


def begin_leg(settings: EngineSettings, run: Run, plain: bool = False) -> Cycling:
    """Ready ``run`` for a leg of any driver (sync, async, streamed) and return the
    leg's :class:`Cycling` (``plain``: the plain loop may run it); the caller ends
    the leg with :meth:`Cycling.close`."""
    run.facts.remaining = partial(remaining_budget, settings, run)
    run.facts.suggestors = settings.registry.names  # (Context.suggestors)
    # what a dead process recorded of the cycles a recovery runs again (no call here:
    # a leg's path through the engine stays as short: docs/architecture.md's figures)
    recovery = run.recovery
    run.facts.replayed = recovery.execution if recovery.recorded_executions else None
    return Cycling(settings, run, CollectorFreeze(adopt=recovery.take_frozen()), plain)


def first_step(run: Run) -> Step:
    """Where a leg that walks the general steps starts: the merge a paused run (or a
    cut merge) left, else a cycle's prelude."""
    return MERGE if run.gating.pending_gate is not None or run.cursor.merge_effects else PRELUDE


def drive_sync(settings: EngineSettings, run: Run) -> RunResult:
    """Walk the steps to the run's stop on this thread (async suggestors on a
    private event loop): from the merge a paused run (or a cut merge) left, else
    from a cycle, the plain loop's when it can take it."""
    plain = plain_engine(settings)
    cycle = begin_leg(settings, run, plain)
    paused = run.gating.pending_gate is not None
    answer: Step | NextCycle = MERGE if paused or run.cursor.merge_effects else NEXT_CYCLE
    registry = settings.registry
    try:
        while True:
            if isinstance(answer, NextCycle):
                # the plain loop takes the next cycle when it can (no async, no work cut)
                fused = plain and not registry.any_async and not run.cursor.cut
                step: Step = PLAIN if fused else PRELUDE
            else:
                step = answer
            end = step.run(cycle)
            if isinstance(end, End):
                return end.result
            answer = end
    finally:
        cycle.close()


async def drive_async(settings: EngineSettings, run: Run) -> RunResult:
    """Walk the steps to the run's stop inside the caller's event loop (never the
    plain loop)."""
    cycle = begin_leg(settings, run)
    step = first_step(run)
    try:
        while True:
            answer = await step.arun(cycle) if isinstance(step, Execute) else step.run(cycle)
            if isinstance(answer, End):
                return answer.result
            step = next_step(answer)
    finally:
        cycle.close()
