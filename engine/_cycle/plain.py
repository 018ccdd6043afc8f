"""Plain cycles: the steps of a cycle fused into one loop, for plain outcomes (W1's
hot path, docs/performance.md).

On an engine with no executor, store, gate or HITL policy
(:func:`plain_engine`), :func:`run_plain` does what the steps of
:mod:`engine._cycle.steps` do (prelude, execute, collect, merge, judge) for
suggestors that return lists of plain proposals (or nothing). A cycle it does not
specialise is handed back to those steps (a :class:`Handover`).
"""

from __future__ import annotations

from math import isfinite
from typing import Any, Protocol

from engine._cycle.collector import FREEZE_AFTER_FACTS, CollectorFreeze
from engine._cycle.judgement import after_merge, fixed_point, judge_budgets
from engine._cycle.run import Run
from engine.budget import Budget
from engine.effect import Effect
from engine.errors import StopRun
from engine.facts import MAX_INT, Fact, Proposal, Provenance
from engine.result import RunResult
from engine.settings import EngineSettings


class GeneralSteps(Protocol):
    """The general steps of :mod:`engine._cycle.steps`, for the cycles
    :func:`run_plain` does not specialise; each walks to the end of the cycle and
    returns the run's result, or None when it goes on."""

    def from_prelude(self) -> RunResult | None:
        """A whole general cycle."""
        ...

    def from_collect(self, eligible: list[int], outcomes: list[Any]) -> RunResult | None:
        """The cycle from the collection of ``outcomes`` of the ``eligible`` suggestors."""
        ...

    def from_merge(self) -> RunResult | None:
        """The cycle from its merge (``run.cursor.merge_effects`` from ``merge_pos``)."""
        ...


def plain_engine(settings: EngineSettings) -> bool:
    """True when :func:`run_plain` may cycle the engine's runs: no executor, store,
    promotion gate or HITL policy."""
    return (
        settings.executor is None
        and settings.store is None
        and not (settings.promotion_gates or settings.hitl_policies)
    )


def run_plain(
    settings: EngineSettings, run: Run, freezer: CollectorFreeze, general: GeneralSteps
) -> RunResult | None:
    """Cycle ``run`` on this thread until it stops (its result), specialised for the
    common case; None when an async suggestor was registered since (the driver's
    async path takes over) or a cycle's work was cut (the next cycle, which runs it
    again, is the driver's general one). Only for a :func:`plain_engine`, whose
    configuration is read once here.

    A cycle it does not specialise (a cancel, a time or invocation budget, pending
    signals, an ``accepts``, the cycle budget) is walked by ``general``'s steps
    from the prelude; a cycle with an outcome other than a list of proposals or
    ``None`` from its collection; a merge that meets a proposal that is not plain
    from that proposal. ``tests/test_plain_cycle.py`` pins it to them.
    """
    ctx = run.context
    reg = settings.registry
    subscribers = reg.subscribers
    dependency_free = reg.dependency_free
    accepts = reg.accepts
    execute = reg.execute
    names = reg.names
    cancelled = settings.runs.cancelled
    run_id = run.run_id
    invocations_by = run.spend.invocations_by
    history = run.spend.history
    streaks = run.spend.streaks
    rejected = run.gating.rejected
    stop_on_error = settings.on_error == "stop"
    # the checks after a merge that need more than the budget (judgement.after_merge)
    judged = bool(
        settings.structural
        or settings.semantic
        or settings.stop_policies
        or settings.criteria
        or settings.progress is not None
    )
    facts = run.facts
    has = facts.identities
    add_identity = has.add
    by_key = facts.by_key
    facts_append = facts.facts.append
    tuple_new = tuple.__new__
    no_parents: tuple[str, ...] = ()
    min_int = -MAX_INT  # negating MAX_INT copies 1.7 kB: once, not per proposal
    owned = freezer.owned
    recorded = facts.recorded  # usage recorded by executions: collect() takes it
    unfrozen = 0
    seen: Budget | None = None
    fast = other_limits = False
    max_cycles = max_facts = 0
    while True:
        if reg.any_async:  # registered since the run started
            if unfrozen:
                freezer.promoted(unfrozen)
            return None
        budget = run.budget
        if budget is not seen:  # a frozen model: read once, until on_stop replaces it
            seen = budget
            fast = not (budget.max_seconds or budget.max_invocations or budget.per_suggestor)
            max_cycles = budget.max_cycles or 0
            max_facts = budget.max_facts or 0
            other_limits = bool(budget.max_tokens or budget.max_cost_usd)
        # as prelude: the eligible suggestors, no side effect before the cycle starts
        eligible: list[int] | None = None
        cycle = run.cursor.cycle
        dirty = run.cursor.dirty
        if (
            fast
            and not (max_cycles and cycle >= max_cycles)
            and not run.cursor.pending_signals
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
                return fixed_point(settings, run, [])
            if reg.any_accepts:
                for i in eligible:
                    if accepts[i] is not None:
                        eligible = None
                        break
        if eligible is None:
            if unfrozen:  # told before the general steps tell theirs
                freezer.promoted(unfrozen)
                unfrozen = 0
            done = general.from_prelude()
            if done is not None:
                return done
            if run.cursor.cut:  # the invocation budget cut work that on_stop continued
                if unfrozen:
                    freezer.promoted(unfrozen)
                return None
            continue
        dirty.clear()
        cycle += 1
        run.cursor.cycle = cycle
        ctx.cycle = cycle
        # as Execute and Collect, for outcomes that are lists of proposals or None
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
                run.spend.invocations += 1
                run.cursor.last_suggestors = (name,)
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
                run.spend.invocations += len(outcomes)
                run.cursor.last_suggestors = tuple(last)
        if not plain:
            if unfrozen:
                freezer.promoted(unfrozen)
                unfrozen = 0
            done = general.from_collect(eligible, outcomes)
            if done is not None:
                return done
            continue
        # as merge (and after_merge's dirty keys), for plain proposals
        new: list[Fact] = []
        run.cursor.cycle_new = new
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
            run.cursor.merge_effects = effects
            run.cursor.merge_pos = other
            if unfrozen:
                freezer.promoted(unfrozen)
                unfrozen = 0
            done = general.from_merge()
            if done is not None:
                return done
            continue
        # as after_merge, when only the budget can stop the run
        elif judged:
            done = after_merge(settings, run)
        elif not new:
            done = fixed_point(settings, run, [])
        elif (max_facts and len(ctx) > max_facts) or other_limits:
            done = judge_budgets(settings, run, [])
        else:
            if owned:
                unfrozen += len(new)
                if unfrozen >= FREEZE_AFTER_FACTS:
                    freezer.promoted(unfrozen)
                    unfrozen = 0
            continue
        if done is not None:
            return done
        if owned:
            unfrozen += len(new)
            if unfrozen >= FREEZE_AFTER_FACTS:
                freezer.promoted(unfrozen)
                unfrozen = 0
