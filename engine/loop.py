"""The cycle loop: start a run, then cycle until a typed stop (docs/concepts.md).

One cycle is :func:`engine.scheduling.prelude` (checks, eligible suggestors),
:mod:`engine.execution` (run them), :func:`engine.collection.collect` (outcomes
into effects), :func:`engine.merge.merge` (proposals into facts) and
:func:`engine.judgement.after_merge` (the stop, or go on). A run paused at a gate
first finishes its interrupted merge. The sync driver is W1's hot path; the async
driver awaits async suggestors in the caller's event loop.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterable, Mapping
from functools import partial
from typing import Any

from engine.accounting import remaining_budget
from engine.collection import collect
from engine.collector import CollectorFreeze
from engine.errors import ConfigurationError, ResumeError
from engine.execution import execute_async, execute_elsewhere, execute_sync
from engine.facts import INPUT_SOURCE, Fact, Provenance, content_key
from engine.judgement import after_merge, pause
from engine.merge import apply_decision, merge
from engine.recording import record_start
from engine.result import RunResult
from engine.run_state import RunState
from engine.scheduling import prelude
from engine.settings import EngineSettings
from engine.stop import HitlGatePending


def start(
    eng: EngineSettings, initial: Mapping[str, Iterable[Any]] | None, run_id: str | None
) -> RunState:
    """A new run: initial facts (provenance ``"input"``) in, their keys dirty, recorded.

    Raises :class:`ConfigurationError` for bad ``initial`` input.
    """
    st = RunState(run_id or uuid.uuid4().hex[:16], eng.budget)
    st.leg_started = eng.clock()
    st.wall_started = time.time()
    eng.runs.enter(st.run_id, clear_cancel=True)
    if initial:
        _promote_initial(st, initial)
    if eng.store is not None:
        record_start(eng, st)
    return st


def _promote_initial(st: RunState, initial: Mapping[str, Iterable[Any]]) -> None:
    ctx = st.context
    if not isinstance(initial, Mapping):
        raise ConfigurationError("initial must map keys to lists of contents")
    for key, contents in initial.items():
        if not isinstance(key, str) or not key:
            raise ConfigurationError(f"initial key {key!r} must be a non-empty string")
        if isinstance(contents, str | bytes) or not isinstance(contents, Iterable):
            raise ConfigurationError(
                f"initial[{key!r}] must be a list of contents, got {type(contents).__name__}"
            )
        for j, content in enumerate(contents):
            try:
                identity = (key, content_key(content))
            except (TypeError, ValueError) as exc:
                raise ConfigurationError(
                    f"initial[{key!r}][{j}] is not JSON-serialisable: {exc}"
                ) from exc
            if ctx._has_identity(identity):
                continue
            fact = Fact(
                ctx._next_id(key),
                key,
                content,
                1.0,
                Provenance(INPUT_SOURCE, 0, f"input/{key}/{j}"),
            )
            ctx._promote(fact, identity)
            st.dirty.add(key)


def drive_sync(eng: EngineSettings, st: RunState) -> RunResult:
    """Cycle to the run's stop on this thread (async suggestors on a private loop)."""
    runner: asyncio.Runner | None = None
    freezer = CollectorFreeze(adopt=st.frozen_on_load)
    st.frozen_on_load = False
    reg = eng.registry
    st.context._remaining = partial(remaining_budget, eng, st)
    elsewhere = eng.executor is not None
    try:
        # inlines begin_cycle/end_cycle: this is W1's hot path
        while True:
            if st.pending_gate is not None or st.merge_effects:
                done = finish_merge(eng, st)
                if done is not None:
                    return done
                continue
            step = prelude(eng, st)
            if isinstance(step, RunResult):
                return step
            if elsewhere:
                outcomes = execute_elsewhere(eng, st, step)
            elif reg.any_async and reg.any_async_in(step):
                if runner is None:
                    runner = asyncio.Runner()
                outcomes = runner.run(execute_async(eng, st, step))
            else:
                outcomes = execute_sync(eng, st, step)
            collect(eng, st, step, outcomes)
            done = finish_merge(eng, st)
            if done is not None:
                return done
            if freezer.owned:
                freezer.promoted(len(st.cycle_new))
    finally:
        freezer.release()
        if runner is not None:
            runner.close()
        eng.runs.leave(st.run_id)


async def drive_async(eng: EngineSettings, st: RunState) -> RunResult:
    """Cycle to the run's stop inside the caller's event loop."""
    freezer = CollectorFreeze(adopt=st.frozen_on_load)
    st.frozen_on_load = False
    reg = eng.registry
    st.context._remaining = partial(remaining_budget, eng, st)
    try:
        while True:
            if st.pending_gate is not None or st.merge_effects:
                done = finish_merge(eng, st)
                if done is not None:
                    return done
                continue
            step = prelude(eng, st)
            if isinstance(step, RunResult):
                return step
            if eng.executor is not None:  # blocking: off the caller's event loop
                outcomes = await asyncio.to_thread(execute_elsewhere, eng, st, step)
            elif reg.any_async_in(step):
                outcomes = await execute_async(eng, st, step)
            else:
                outcomes = execute_sync(eng, st, step)
            collect(eng, st, step, outcomes)
            done = finish_merge(eng, st)
            if done is not None:
                return done
            freezer.promoted(len(st.cycle_new))
    finally:
        freezer.release()
        eng.runs.leave(st.run_id)


def finish_merge(eng: EngineSettings, st: RunState) -> RunResult | None:
    """Apply a gate's decision if the run waited on one, merge, then judge the cycle."""
    pg = st.pending_gate
    if pg is not None:
        if pg.decision is None:
            raise ResumeError(f"run {st.run_id} waits on gate {pg.record.gate_id}")
        apply_decision(eng, st)
    stopped = merge(eng, st)
    if stopped is not None:
        if isinstance(stopped, HitlGatePending):
            return pause(eng, st, stopped)
        st.pending_signals.append(stopped)
    return after_merge(eng, st)
