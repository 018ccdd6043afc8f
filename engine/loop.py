"""The cycle loop: start a run, then cycle until a typed stop (docs/concepts.md).

One cycle is :func:`engine.scheduling.prelude` (checks, eligible suggestors),
:mod:`engine.execution` (run them), :func:`engine.collection.collect` (outcomes
into effects), :func:`engine.merge.merge` (proposals into facts) and
:func:`engine.judgement.after_merge` (the stop, or go on). A run paused at a gate
first finishes its interrupted merge. The sync driver is W1's hot path: on an
engine with no executor, store, gate or HITL policy it runs :func:`run_plain`,
those same steps fused into one loop for plain outcomes (docs/performance.md); the
async driver awaits async suggestors in the caller's event loop.
"""

from __future__ import annotations

import asyncio
import gc
import os
import time
from collections.abc import Iterable, Mapping
from functools import partial
from math import isfinite
from typing import Any

from engine.accounting import remaining_budget
from engine.budget import Budget
from engine.collection import collect
from engine.collector import FREEZE_AFTER_FACTS, CollectorFreeze, pause_for_merge
from engine.effect import Effect
from engine.errors import ConfigurationError, ResumeError
from engine.execution import execute_async, execute_elsewhere, execute_sync
from engine.facts import INPUT_SOURCE, MAX_INT, Fact, Proposal, Provenance, content_key
from engine.judgement import after_merge, fixed_point, judge_budgets, pause
from engine.merge import apply_decision, merge
from engine.recording import record_start
from engine.result import RunResult
from engine.run_state import RunState
from engine.scheduling import prelude
from engine.settings import EngineSettings
from engine.stop import HitlGatePending
from engine.suggestor import StopRun


def start(
    eng: EngineSettings, initial: Mapping[str, Iterable[Any]] | None, run_id: str | None
) -> RunState:
    """A new run: initial facts (provenance ``"input"``) in, their keys dirty, recorded.

    Raises :class:`ConfigurationError` for bad ``initial`` input.
    """
    st = RunState(run_id or new_run_id(), eng.budget)
    st.leg_started = eng.clock()
    st.wall_started = time.time()
    eng.runs.enter(st.run_id, clear_cancel=True)
    if initial:
        _promote_initial(st, initial)
    if eng.store is not None:
        record_start(eng, st)
    return st


def new_run_id() -> str:
    """16 hex digits, as ``uuid.uuid4().hex[:16]`` (the version nibble included),
    from 8 random bytes: the uuid module's own code costs more at each start."""
    b = bytearray(os.urandom(8))
    b[6] = (b[6] & 0x0F) | 0x40
    return b.hex()


def _promote_initial(st: RunState, initial: Mapping[str, Iterable[Any]]) -> None:
    ctx = st.context
    if type(initial) is not dict and not isinstance(initial, Mapping):
        raise ConfigurationError("initial must map keys to lists of contents")
    for key, contents in initial.items():
        if not isinstance(key, str) or not key:
            raise ConfigurationError(f"initial key {key!r} must be a non-empty string")
        if type(contents) is not list and (
            isinstance(contents, str | bytes) or not isinstance(contents, Iterable)
        ):
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
    plain = plain_engine(eng)
    owned = freezer.owned
    try:
        while True:
            if st.pending_gate is not None or st.merge_effects:
                done = finish_merge(eng, st)
                if done is not None:
                    return done
                continue
            if plain and not reg.any_async and not st.cut:  # W1's hot path
                done = run_plain(eng, st, freezer)
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
            if owned:
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
    paused = pause_for_merge(st.merge_effects)
    try:
        stopped = merge(eng, st)
    finally:
        if paused:
            gc.enable()
    if stopped is not None:
        if isinstance(stopped, HitlGatePending):
            return pause(eng, st, stopped)
        st.pending_signals.append(stopped)
    return after_merge(eng, st)


def _general(eng: EngineSettings, st: RunState) -> RunResult | None:
    """One general sync cycle (what :func:`drive_sync` does without plain cycles)."""
    step = prelude(eng, st)
    if isinstance(step, RunResult):
        return step
    return _collected(eng, st, step, execute_sync(eng, st, step))


def _collected(
    eng: EngineSettings, st: RunState, eligible: list[int], outcomes: list[Any]
) -> RunResult | None:
    collect(eng, st, eligible, outcomes)
    return finish_merge(eng, st)


def _counted(st: RunState, freezer: CollectorFreeze, unfrozen: int) -> int:
    """``unfrozen`` plus the cycle's new facts; the freezer is told once they are
    enough (as if told after every cycle)."""
    if not freezer.owned:
        return 0
    unfrozen += len(st.cycle_new)
    if unfrozen < FREEZE_AFTER_FACTS:
        return unfrozen
    freezer.promoted(unfrozen)
    return 0


def plain_engine(eng: EngineSettings) -> bool:
    """True when :func:`run_plain` may cycle the engine's runs: no executor, store,
    promotion gate or HITL policy."""
    return (
        eng.executor is None
        and eng.store is None
        and not (eng.promotion_gates or eng.hitl_policies)
    )


def run_plain(eng: EngineSettings, st: RunState, freezer: CollectorFreeze) -> RunResult | None:
    """Cycle ``st`` on this thread until it stops (its result), specialised for the
    common case; None when an async suggestor was registered since (the driver's
    async path takes over) or a cycle's work was cut (the next cycle, which runs it
    again, is the driver's general one). Only for a :func:`plain_engine`, whose
    configuration is read once here.

    A cycle it does not specialise (a cancel, a time or invocation budget, pending
    signals, an ``accepts``, the cycle budget) is the general one:
    :func:`engine.scheduling.prelude`, ``execute_sync``, ``collect`` and
    :func:`finish_merge`. So is any outcome other than a list of proposals or
    ``None``; and :func:`engine.merge.merge` takes the merge over from the first
    proposal that is not plain. ``tests/test_plain_cycle.py`` pins it to them.
    """
    ctx = st.context
    reg = eng.registry
    subscribers = reg.subscribers
    dependency_free = reg.dependency_free
    accepts = reg.accepts
    execute = reg.execute
    names = reg.names
    cancelled = eng.runs.cancelled
    run_id = st.run_id
    invocations_by = st.invocations_by
    history = st.history
    streaks = st.streaks
    rejected = st.rejected
    stop_on_error = eng.on_error == "stop"
    # the checks after a merge that need more than the budget (judgement.after_merge)
    judged = bool(
        eng.structural
        or eng.semantic
        or eng.stop_policies
        or eng.criteria
        or eng.progress is not None
    )
    has = ctx._identities
    add_identity = has.add
    by_key = ctx._by_key
    facts_append = ctx._facts.append
    tuple_new = tuple.__new__
    no_parents: tuple[str, ...] = ()
    min_int = -MAX_INT  # negating MAX_INT copies 1.7 kB: once, not per proposal
    owned = freezer.owned
    recorded = ctx._recorded  # usage recorded by executions: collect() takes it
    unfrozen = 0
    seen: Budget | None = None
    fast = other_limits = False
    max_cycles = max_facts = 0
    while True:
        if reg.any_async:  # registered since the run started
            if unfrozen:
                freezer.promoted(unfrozen)
            return None
        budget = st.budget
        if budget is not seen:  # a frozen model: read once, until on_stop replaces it
            seen = budget
            fast = not (budget.max_seconds or budget.max_invocations or budget.per_suggestor)
            max_cycles = budget.max_cycles or 0
            max_facts = budget.max_facts or 0
            other_limits = bool(budget.max_tokens or budget.max_cost_usd)
        # as prelude: the eligible suggestors, no side effect before the cycle starts
        eligible: list[int] | None = None
        cycle = st.cycle
        dirty = st.dirty
        if (
            fast
            and not (max_cycles and cycle >= max_cycles)
            and not st.pending_signals
            and run_id not in cancelled
        ):
            if len(dirty) == 1 and not dependency_free:
                for key in dirty:
                    eligible = subscribers.get(key)
            else:
                candidates = set(dependency_free)
                for key in dirty:
                    s = subscribers.get(key)
                    if s is not None:
                        candidates.update(s)
                eligible = sorted(candidates)
            if not eligible:  # a fixed point, as prelude finds it
                dirty.clear()
                ctx.cycle = cycle + 1
                return fixed_point(eng, st, [])
            if reg.any_accepts:
                for i in eligible:
                    if accepts[i] is not None:
                        eligible = None
                        break
        if eligible is None:
            done = _general(eng, st)
            if done is not None:
                return done
            unfrozen = _counted(st, freezer, unfrozen)
            if st.cut:  # the invocation budget cut work that on_stop continued
                if unfrozen:
                    freezer.promoted(unfrozen)
                return None
            continue
        dirty.clear()
        cycle += 1
        st.cycle = cycle
        ctx.cycle = cycle
        # as execute_sync and collect, for outcomes that are lists of proposals or None
        outcomes: list[Any]
        plain = True
        if len(eligible) == 1:
            i = eligible[0]
            try:
                out = execute[i](ctx)
            except BaseException as exc:
                if isinstance(exc, KeyboardInterrupt | SystemExit):
                    raise
                out = exc
            if type(out) is list:
                for p in out:
                    if type(p) is not Proposal:
                        plain = False
                        break
            elif out is not None:
                plain = False
            if plain and not recorded:
                name = names[i]
                invocations_by[name] = invocations_by.get(name, 0) + 1
                history.append(name)
                st.invocations += 1
                st.last_suggestors = (name,)
                if streaks:
                    streaks.pop(name, None)
                effects = [(name, out)] if out else []
            else:
                plain = False  # collect() takes it, and any usage it recorded
                outcomes = [out]
        else:
            outcomes = []
            # a copy: a key's subscribers are the registry's own list, which a
            # suggestor registered during this cycle would join (it runs from the next)
            for i in eligible[:]:
                try:
                    out = execute[i](ctx)
                except BaseException as exc:
                    if isinstance(exc, KeyboardInterrupt | SystemExit):
                        raise
                    outcomes.append(exc)
                    plain = False
                    if stop_on_error or isinstance(exc, StopRun):
                        break
                    continue
                outcomes.append(out)
                if type(out) is list:
                    for p in out:
                        if type(p) is not Proposal:
                            plain = False
                            break
                elif out is not None:
                    plain = False
                    if type(out) is Effect and out.refusal is not None:
                        break
            if plain and recorded:
                plain = False
            if plain:
                effects = []
                last: list[str] = []
                for i, out in zip(eligible, outcomes, strict=False):
                    name = names[i]
                    last.append(name)
                    invocations_by[name] = invocations_by.get(name, 0) + 1
                    history.append(name)
                    if streaks:
                        streaks.pop(name, None)
                    if out:
                        effects.append((name, out))
                st.invocations += len(outcomes)
                st.last_suggestors = tuple(last)
        if not plain:
            done = _collected(eng, st, eligible, outcomes)
            if done is not None:
                return done
            unfrozen = _counted(st, freezer, unfrozen)
            continue
        # as merge (and after_merge's dirty keys), for plain proposals
        new: list[Fact] = []
        st.cycle_new = new
        other: tuple[int, int] | None = None
        for ei, (name, proposals) in enumerate(effects):
            prefix = f"{name}/{cycle}/{ei}."
            for pj, p in enumerate(proposals):
                key, content, confidence, parents, given_id = p
                c = type(content)
                if (
                    type(key) is not str
                    or not key
                    or type(confidence) is not float
                    or not 0.0 <= confidence <= 1.0
                    or parents is not no_parents
                    or not (
                        (c is str and content.isascii())
                        or (c is int and min_int < content < MAX_INT)
                        or (c is float and isfinite(content))
                    )
                    or (given_id is not None and (type(given_id) is not str or not given_id))
                ):
                    other = (ei, pj)
                    break
                identity = (key, content)
                if identity in has or (rejected and identity in rejected):
                    continue
                pid = given_id or f"{prefix}{pj}"
                prov = tuple_new(Provenance, (name, cycle, pid, parents))
                bucket = by_key.get(key)
                if bucket is None:
                    fact = tuple_new(Fact, (f"{key}#0", key, content, confidence, prov))
                    by_key[key] = [fact]
                else:
                    fact = tuple_new(Fact, (f"{key}#{len(bucket)}", key, content, confidence, prov))
                    bucket.append(fact)
                facts_append(fact)
                add_identity(identity)
                new.append(fact)
                dirty.add(key)
            if other is not None:
                break
        if other is not None:  # merge() goes on from that proposal
            st.merge_effects = effects
            st.merge_pos = other
            done = finish_merge(eng, st)
        # as after_merge, when only the budget can stop the run
        elif judged:
            done = after_merge(eng, st)
        elif not new:
            done = fixed_point(eng, st, [])
        elif (max_facts and len(ctx) > max_facts) or other_limits:
            done = judge_budgets(eng, st, [])
        else:
            if owned:
                unfrozen += len(new)
                if unfrozen >= FREEZE_AFTER_FACTS:
                    freezer.promoted(unfrozen)
                    unfrozen = 0
            continue
        if done is not None:
            return done
        unfrozen = _counted(st, freezer, unfrozen)
