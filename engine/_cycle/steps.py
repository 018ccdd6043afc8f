"""The cycle's steps as types, and the drivers that walk them (docs/concepts.md).

Each step's ``run(cycle)`` does its part of a cycle and returns the next step, as
the nodes of pydantic-ai's agent graph do; :class:`End` carries the run's result
(a stop or a pause). ``cycle`` is the :class:`Cycling` of this leg: the engine's
settings, the :class:`~engine._cycle.run.Run` and what the driver keeps between
cycles (the collector freeze, an event loop for async suggestors).

``Prelude`` (checks, eligible suggestors) → ``Execute`` (run them) → ``Collect``
(outcomes into effects) → ``Merge`` (a gate's decision, then proposals into
facts; a gate that matches pauses) → ``Judge`` (invariants, budgets, policies,
criteria: the stop, or the next ``Prelude``). On an engine with no executor,
store, gate or HITL policy, ``PlainCycles`` runs those same steps fused into one
loop for plain outcomes (W1's hot path, :mod:`engine._cycle.plain`).
"""

from __future__ import annotations

import asyncio
import gc
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from engine._cycle.accounting import remaining_budget
from engine._cycle.collection import collect
from engine._cycle.collector import CollectorFreeze, pause_for_merge
from engine._cycle.execution import execute_async, execute_elsewhere, execute_sync
from engine._cycle.judgement import after_merge, pause
from engine._cycle.merge import apply_decision, merge
from engine._cycle.plain import plain_engine, run_plain
from engine._cycle.run import Run
from engine._cycle.scheduling import prelude
from engine.errors import ResumeError
from engine.result import RunResult
from engine.settings import EngineSettings
from engine.stop import HitlGatePending


@dataclass(slots=True)
class Cycling:
    """One leg of a run being driven: ``settings`` (the engine's), ``run`` (its
    state), the collector ``freezer`` and, once an async suggestor runs on the sync
    driver, its event loop ``runner``; ``plain``: the engine may take
    :class:`PlainCycles` (:func:`engine._cycle.plain.plain_engine`)."""

    settings: EngineSettings
    run: Run
    freezer: CollectorFreeze
    plain: bool = False
    runner: asyncio.Runner | None = None

    # the general steps the plain loop hands a cycle to (engine._cycle.plain.GeneralSteps)
    def from_prelude(self) -> RunResult | None:
        """Walk a whole cycle: the run's result, or None when it goes on."""
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
            step = step.run(self)
            kind = type(step)
            if kind is End:
                result: RunResult = step.result
                return result
            if kind is Prelude or kind is PlainCycles:
                return None


@dataclass(slots=True)
class End:
    """The run stopped or paused: its ``result``."""

    result: RunResult


class Prelude:
    """Before a cycle: a cancel, the time and cycle budgets, then the eligible
    suggestors (:func:`engine._cycle.scheduling.prelude`); none is a fixed point."""

    __slots__ = ()

    def run(self, cycle: Cycling) -> Execute | End:
        """The :class:`Execute` of the eligible suggestors, or the run's end."""
        eligible = prelude(cycle.settings, cycle.run)
        if isinstance(eligible, RunResult):
            return End(eligible)
        return Execute(eligible)


@dataclass(slots=True)
class Execute:
    """Run the ``eligible`` suggestors: on the executor's workers, on an event loop
    (async ones) or on this thread (:mod:`engine._cycle.execution`)."""

    eligible: list[int]

    def run(self, cycle: Cycling) -> Collect:
        """Execute on the sync driver (an async suggestor gets the leg's own loop)."""
        settings, run, eligible = cycle.settings, cycle.run, self.eligible
        if settings.executor is not None:
            outcomes = execute_elsewhere(settings, run, eligible)
        elif settings.registry.any_async and settings.registry.any_async_in(eligible):
            if cycle.runner is None:
                cycle.runner = asyncio.Runner()
            outcomes = cycle.runner.run(execute_async(settings, run, eligible))
        else:
            outcomes = execute_sync(settings, run, eligible)
        return Collect(eligible, outcomes)

    async def arun(self, cycle: Cycling) -> Collect:
        """Execute inside the caller's event loop (blocking work off it)."""
        settings, run, eligible = cycle.settings, cycle.run, self.eligible
        if settings.executor is not None:
            outcomes = await asyncio.to_thread(execute_elsewhere, settings, run, eligible)
        elif settings.registry.any_async_in(eligible):
            outcomes = await execute_async(settings, run, eligible)
        else:
            outcomes = execute_sync(settings, run, eligible)
        return Collect(eligible, outcomes)


@dataclass(slots=True)
class Collect:
    """Turn the ``outcomes`` of the ``eligible`` suggestors into effects: usage,
    failures, ``StopRun``, refusals (:func:`engine._cycle.collection.collect`)."""

    eligible: list[int]
    outcomes: list[Any] = field(default_factory=list)

    def run(self, cycle: Cycling) -> Merge:
        """Collect, then merge."""
        collect(cycle.settings, cycle.run, self.eligible, self.outcomes)
        return MERGE


class Merge:
    """Apply a gate's decision if the run waited on one, then merge the cycle's
    proposals into facts (:func:`engine._cycle.merge.merge`); a gate that matches
    pauses the run."""

    __slots__ = ()

    def run(self, cycle: Cycling) -> Judge | End:
        """The :class:`Judge` of the merged cycle, or the pause."""
        settings, run = cycle.settings, cycle.run
        pg = run.gating.pending_gate
        if pg is not None:
            if pg.decision is None:
                raise ResumeError(f"run {run.run_id} waits on gate {pg.record.gate_id}")
            apply_decision(settings, run)
        paused = pause_for_merge(run.cursor.merge_effects)
        try:
            stopped = merge(settings, run)
        finally:
            if paused:
                gc.enable()
        if stopped is not None:
            if isinstance(stopped, HitlGatePending):
                return End(pause(settings, run, stopped))
            run.cursor.pending_signals.append(stopped)
        return JUDGE


class Judge:
    """Judge the merged cycle: invariants, budgets, policies, criteria
    (:func:`engine._cycle.judgement.after_merge`); the stop, or the next cycle."""

    __slots__ = ()

    def run(self, cycle: Cycling) -> Prelude | PlainCycles | End:
        """The next cycle's first step, or the run's end."""
        done = after_merge(cycle.settings, cycle.run)
        if done is not None:
            return End(done)
        run = cycle.run
        if cycle.freezer.owned:
            cycle.freezer.promoted(len(run.cursor.cycle_new))
        # the plain loop takes the next cycle when it can (no async suggestor, no work cut)
        if cycle.plain and not cycle.settings.registry.any_async and not run.cursor.cut:
            return PLAIN
        return PRELUDE


class PlainCycles:
    """Cycles fused into one loop for plain outcomes (:func:`run_plain`); it hands
    back to :class:`Prelude` when a cycle needs the general steps."""

    __slots__ = ()

    def run(self, cycle: Cycling) -> Prelude | End:
        """Plain cycles to the stop, or the general step that takes over."""
        done = run_plain(cycle.settings, cycle.run, cycle.freezer, cycle)
        return PRELUDE if done is None else End(done)


PRELUDE = Prelude()
MERGE = Merge()
JUDGE = Judge()
PLAIN = PlainCycles()


def first_step(cycle: Cycling) -> Merge | Prelude | PlainCycles:
    """Where a leg starts: the merge a paused run (or a cut merge) left, or a cycle
    (the plain loop when it can take it)."""
    run = cycle.run
    if run.gating.pending_gate is not None or run.cursor.merge_effects:
        return MERGE
    if cycle.plain and not cycle.settings.registry.any_async and not run.cursor.cut:
        return PLAIN
    return PRELUDE


def drive_sync(settings: EngineSettings, run: Run) -> RunResult:
    """Walk the steps to the run's stop on this thread (async suggestors on a
    private event loop)."""
    freezer = CollectorFreeze(adopt=run.recovery.frozen_on_load)
    cycle = Cycling(settings, run, freezer, plain_engine(settings))
    run.recovery.frozen_on_load = False
    run.context.bind_remaining(partial(remaining_budget, settings, run))
    try:
        step: Any = first_step(cycle)
        while type(step) is not End:
            step = step.run(cycle)
        result: RunResult = step.result
        return result
    finally:
        cycle.freezer.release()
        if cycle.runner is not None:
            cycle.runner.close()
        settings.runs.leave(run.run_id)


async def drive_async(settings: EngineSettings, run: Run) -> RunResult:
    """Walk the steps to the run's stop inside the caller's event loop."""
    cycle = Cycling(settings, run, CollectorFreeze(adopt=run.recovery.frozen_on_load))
    run.recovery.frozen_on_load = False
    run.context.bind_remaining(partial(remaining_budget, settings, run))
    try:
        step: Any = first_step(cycle)
        while type(step) is not End:
            if type(step) is Execute:
                step = await step.arun(cycle)
            elif type(step) is PlainCycles:  # the caller's loop never takes the plain path
                step = PRELUDE
            else:
                step = step.run(cycle)
        result: RunResult = step.result
        return result
    finally:
        cycle.freezer.release()
        settings.runs.leave(run.run_id)
