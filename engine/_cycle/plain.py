"""Plain cycles: the steps of a cycle fused into one loop, for plain outcomes (the hot
path of a chain of plain suggestors, docs/performance.md).

On an engine with no executor, store, gate or HITL policy
(:func:`plain_engine`), :func:`run_plain` does what the steps of
:mod:`engine._cycle.steps` do (prelude, execute, collect, merge, judge) for
suggestors that return lists of plain proposals (or nothing). A cycle it does not
specialise (a cancel, a time or invocation budget, pending signals, an ``accepts``,
the cycle budget) is walked by the general steps from the prelude; a cycle with an
outcome other than a list of proposals or ``None`` from its collection; a merge that
meets a proposal that is not plain from that proposal. ``tests/test_plain_cycle.py``
pins it to them.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Set as AbstractSet
from functools import partial
from math import isfinite
from typing import Any, Protocol

from engine._cycle.collector import FREEZE_AFTER_FACTS, CollectorFreeze
from engine._cycle.execute import execute_sorting
from engine._cycle.judge import after_merge, fixed_point, judge_budgets
from engine._cycle.run import Run
from engine.budget import Budget
from engine.facts import MAX_INT, Fact, Proposal, Provenance
from engine.result import RunResult
from engine.settings import EngineSettings

_MIN_INT = -MAX_INT  # negating MAX_INT copies 1.7 kB: once, not per proposal


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
    configuration :class:`PlainLoop` reads once; the run's cursor and spend hear of
    the plain cycles before anything else reads them (:meth:`PlainLoop.settle`).
    What it does not specialise goes to ``general`` (the module's docstring)."""
    loop = PlainLoop(settings, run, freezer, general)
    ctx, cursor, reg, ran = run.context, run.cursor, settings.registry, loop.ran
    subscribers, dependency_free = reg.subscribers, reg.dependency_free
    execute, names = reg.execute, reg.names
    cancelled, run_id = settings.runs.cancelled, run.run_id
    recorded = run.facts.recorded  # usage recorded by executions: collect() takes it
    owned, judged = freezer.owned, loop.judged
    unfrozen = 0
    stale = True  # what the general steps or a judgement may change: read again
    while True:
        if stale:
            stale = False
            cycle, last, new = cursor.cycle, cursor.last_suggestors, cursor.promotions()
            dirty = cursor.keys_changing()
            fast, max_cycles, max_facts, other_limits = loop.limits(run.budget)
            fast = fast and not cursor.pending_signals
        if reg.any_async:  # registered since the run started
            loop.leave(unfrozen, cycle, last, new)
            return None
        # as prelude: the eligible suggestors, no side effect before the cycle starts
        eligible: list[int] | None = None
        if fast and not (max_cycles and cycle >= max_cycles) and run_id not in cancelled:
            if len(dirty) == 1 and not dependency_free:
                for key in dirty:
                    eligible = subscribers.get(key)
            else:
                eligible = loop.candidates(dirty)
            if not eligible:  # a fixed point, as prelude finds it
                return loop.fixed_point(cycle, last, new)
            if reg.any_accepts and loop.accepting(eligible):
                eligible = None
        if eligible is None:
            finished, done = loop.general_cycle(unfrozen, cycle, last, new)
            stale, unfrozen = True, 0
            if finished:
                return done
            continue
        dirty.clear()
        ctx.cycle = cycle = cycle + 1
        new = []
        # as Execute and Collect, for outcomes that are lists of proposals or None
        if len(eligible) == 1:
            i = eligible[0]
            last = (names[i],)
            try:
                out = execute[i](ctx)
            except BaseException as exc:
                if isinstance(exc, KeyboardInterrupt | SystemExit):
                    raise
                out = exc
            plain = True  # as execute_sorting tells, without a call on the hot path
            if type(out) is list:
                for p in out:
                    if type(p) is not Proposal:
                        plain = False
                        break
            elif out is not None:
                plain = False
            if plain and not recorded:
                effects = [(last[0], out)] if out else []
            else:
                plain, outcomes = False, [out]
        else:
            last = tuple(map(names.__getitem__, eligible))  # no comprehension frame
            # a copy: a key's subscribers are the registry's own list, which a
            # suggestor registered during this cycle would join (it runs from the next)
            stop_on_error = settings.on_error == "stop"
            outcomes, plain = execute_sorting(execute, ctx, eligible[:], stop_on_error)
            plain = plain and not recorded
            if plain:  # a loop, not a comprehension: a comprehension is a frame (3.11)
                effects = []
                for i, out in zip(eligible, outcomes, strict=False):
                    if out:
                        effects.append((names[i], out))
        if not plain:  # collect() takes it, and any usage it recorded
            step = partial(general.from_collect, eligible, outcomes)
            done, stale, unfrozen = loop.hand_over(unfrozen, step, cycle, last, new), True, 0
            if done is not None:
                return done
            continue
        ran.extend(last)
        # as merge (and after_merge's dirty keys), for plain proposals
        if effects and loop.merge(effects, cycle, new, dirty):  # merge() goes on from there
            done, stale = loop.hand_over(unfrozen, general.from_merge, cycle, last, new), True
            unfrozen = 0
            if done is not None:
                return done
            continue
        if judged or not new or (max_facts and len(ctx) > max_facts) or other_limits:
            stale = True
            done = loop.judge(cycle, last, new)  # as after_merge, when only the budget can stop
            if done is not None:
                return done
        if owned:
            unfrozen += len(new)
            if unfrozen >= FREEZE_AFTER_FACTS:
                freezer.promoted(unfrozen)
                unfrozen = 0


class PlainLoop:
    """What :func:`run_plain` reads once (the engine's configuration, the run's
    fact index) and the steps of a plain cycle that are not its hot path: the
    eligible suggestors of several keys, the merge, the judgement, the hand-over to
    the general steps."""

    __slots__ = (
        "freezer",
        "general",
        "judged",
        "limits_of",
        "ran",
        "rejected",
        "run",
        "seen",
        "settings",
        "sinks",
    )

    def __init__(
        self, settings: EngineSettings, run: Run, freezer: CollectorFreeze, general: GeneralSteps
    ) -> None:
        self.settings = settings
        self.run = run
        self.freezer = freezer
        self.general = general
        # the checks after a merge that need more than the budget (judge.after_merge)
        self.judged = bool(
            settings.structural
            or settings.semantic
            or settings.stop_policies
            or settings.criteria
            or settings.progress is not None
        )
        facts = run.facts
        has = facts.identities
        # where the merge puts a fact: its identity, its key's bucket, the facts in order
        self.sinks = (has, has.add, facts.by_key, facts.facts.append, run.gating.rejected)
        self.ran: list[str] = []  # the suggestors run cleanly since the spend heard
        self.seen: Budget | None = None
        self.limits_of: tuple[bool, int, int, bool] = (False, 0, 0, False)

    def limits(self, budget: Budget) -> tuple[bool, int, int, bool]:
        """``budget`` as the loop reads it: no time or invocation limit (``fast``),
        ``max_cycles``, ``max_facts``, a token or cost limit; read once per budget (a
        frozen model, until ``on_stop`` replaces it)."""
        if budget is not self.seen:
            self.seen = budget
            fast = not (budget.max_seconds or budget.max_invocations or budget.per_suggestor)
            other = bool(budget.max_tokens or budget.max_cost_usd)
            self.limits_of = (fast, budget.max_cycles or 0, budget.max_facts or 0, other)
        return self.limits_of

    def candidates(self, dirty: AbstractSet[str]) -> list[int]:
        """The subscribers of the ``dirty`` keys and the dependency-free suggestors,
        in registration order."""
        reg = self.settings.registry
        candidates = set(reg.dependency_free)
        subscribers = reg.subscribers
        for key in dirty:
            s = subscribers.get(key)
            if s is not None:
                candidates.update(s)
        return sorted(candidates)

    def accepting(self, eligible: list[int]) -> bool:
        """True when one of ``eligible`` has an ``accepts`` (the prelude's to call)."""
        accepts = self.settings.registry.accepts
        return any(accepts[i] is not None for i in eligible)

    def merge(
        self,
        effects: list[tuple[str, list[Proposal]]],
        cycle: int,
        new: list[Fact],
        dirty: set[str],
    ) -> bool:
        """Promote the plain proposals of ``effects`` (into ``new``, their keys into
        ``dirty``), as Merge; True when a proposal that is not plain stops it (the
        cursor's merge goes on from there)."""
        has, add_identity, by_key, facts_append, rejected = self.sinks
        tuple_new = tuple.__new__
        no_parents: tuple[str, ...] = ()
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
                        or (c is int and _MIN_INT < content < MAX_INT)
                        or (c is float and isfinite(content))
                    )
                    or (given_id is not None and (type(given_id) is not str or not given_id))
                ):
                    self.run.cursor.merge_from((ei, pj), effects)
                    return True
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
        return False

    def settle(self, cycle: int, last: tuple[str, ...], new: list[Fact]) -> None:
        """Tell the run's cursor and spend what the plain cycles did since they last
        heard (before anything reads them): the loop is at ``cycle``, whose
        suggestors were ``last`` and whose promoted facts are ``new``."""
        ran = self.ran
        if ran:
            self.run.spend.ran_cleanly(ran)
            ran.clear()
        self.run.cursor.ran_plain(cycle, last, new)

    def judge(self, cycle: int, last: tuple[str, ...], new: list[Fact]) -> RunResult | None:
        """The judgement of a plain cycle that may stop the run (as after_merge)."""
        self.settle(cycle, last, new)
        settings, run = self.settings, self.run
        if self.judged:
            return after_merge(settings, run)
        if not new:
            return fixed_point(settings, run, [])
        return judge_budgets(settings, run, [])

    def fixed_point(self, cycle: int, last: tuple[str, ...], new: list[Fact]) -> RunResult:
        """No suggestor is eligible before the next cycle: a fixed point, as prelude."""
        self.settle(cycle, last, new)
        self.run.cursor.take_wakers()
        self.run.context.cycle = cycle + 1
        return fixed_point(self.settings, self.run, [])

    def general_cycle(
        self, unfrozen: int, cycle: int, last: tuple[str, ...], new: list[Fact]
    ) -> tuple[bool, RunResult | None]:
        """A whole cycle walked by the general steps: whether the loop ends, and the
        run's result (None: the driver goes on, the work cut last cycle first)."""
        done = self.hand_over(unfrozen, self.general.from_prelude, cycle, last, new)
        if done is not None:
            return True, done
        # the invocation budget cut work that on_stop continued
        return bool(self.run.cursor.cut), None

    def hand_over(
        self,
        unfrozen: int,
        step: Callable[[], RunResult | None],
        cycle: int,
        last: tuple[str, ...],
        new: list[Fact],
    ) -> RunResult | None:
        """The rest of the cycle walked by a general ``step``, once the parts heard of
        the plain cycles, and the freezer of the facts they promoted (before the
        general steps tell theirs)."""
        self.settle(cycle, last, new)
        if unfrozen:
            self.freezer.promoted(unfrozen)
        return step()

    def leave(self, unfrozen: int, cycle: int, last: tuple[str, ...], new: list[Fact]) -> None:
        """The loop ends without a result (an async suggestor was registered)."""
        self.settle(cycle, last, new)
        if unfrozen:
            self.freezer.promoted(unfrozen)
