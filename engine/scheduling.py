"""Scheduling: the checks before a cycle and its eligible suggestors (docs/concepts.md
steps 2 and 3).

Before a cycle: a cancel → ``UserCancelled``; the time budget used up →
``TimeBudgetExhausted``; ``max_cycles`` done → ``CycleBudgetExhausted``. The
eligible suggestors are the subscribers of the keys that changed in the previous
cycle (every key present in cycle 1), the dependency-free ones and those whose
execution was cut in the previous cycle (before a resume too), in registration
order, filtered by ``accepts(ctx)``; none is a fixed point.
"""

from __future__ import annotations

import time

from engine.accounting import elapsed_ms, ms
from engine.collection import describe, record_failure
from engine.judgement import fixed_point, stop, stop_or_continue
from engine.result import RunResult
from engine.run_state import RunState
from engine.settings import EngineSettings
from engine.stop import CycleBudgetExhausted, TimeBudgetExhausted, UserCancelled
from engine.store import AuditEvent


def prelude(eng: EngineSettings, st: RunState) -> list[int] | RunResult:
    """Checks before a cycle, then the eligible suggestors (registration order);
    the run's result when it ends here."""
    if st.run_id in eng.runs.cancelled:
        return stop(eng, st, [UserCancelled()])
    budget = st.budget
    if budget.max_seconds:
        elapsed = elapsed_ms(eng, st)
        if elapsed > budget.max_seconds * 1000:
            r = stop_or_continue(
                eng,
                st,
                [TimeBudgetExhausted(duration_ms=elapsed, limit_ms=ms(budget.max_seconds))],
            )
            if r is not None:
                return r
    ctx = st.context
    ctx.cycle = st.cycle + 1
    dirty = st.dirty
    cut = st.cut
    eligible = eligible_suggestors(eng, st)
    if eligible is None:  # accepts() raised and on_error="stop"
        signals = st.pending_signals
        st.pending_signals = []
        return stop(eng, st, signals)
    if not eligible:
        return fixed_point(eng, st, list(st.pending_signals))
    if budget.max_cycles and st.cycle >= budget.max_cycles:
        st.dirty = dirty  # kept: a resumed run wakes the same subscribers
        st.cut = cut  # and runs the work cut before
        r = stop_or_continue(
            eng, st, [CycleBudgetExhausted(cycles_executed=st.cycle, limit=budget.max_cycles)]
        )
        if r is not None:
            ctx.cycle = st.cycle
            return r
        st.dirty = set()
        st.cut = []
    st.cycle += 1
    if eng.store is not None:
        names = eng.registry.names
        st.events.append(
            AuditEvent(
                "cycle_started", st.cycle, {"eligible": [names[i] for i in eligible]}, time.time()
            )
        )
    return eligible


def eligible_suggestors(eng: EngineSettings, st: RunState) -> list[int] | None:
    """Eligible suggestors in registration order; None when ``accepts`` raised and
    ``on_error="stop"`` (the ``Error`` is in ``st.pending_signals``). Costs
    O(subscribers of the dirty keys + dependency-free suggestors + cut ones): the
    suggestors whose execution was cut (``st.cut``) are eligible again."""
    ctx = st.context
    dirty = st.dirty
    reg = eng.registry
    subs = reg.subscribers
    st.dirty = set()
    cut = st.cut
    ordered: list[int]
    if len(dirty) == 1 and not reg.dependency_free and not cut:
        # one changed key: its subscribers are already in registration order
        for key in dirty:
            ordered = subs.get(key) or []
    else:
        candidates: set[int] = set(reg.dependency_free)
        for key in dirty:
            s = subs.get(key)
            if s is not None:
                candidates.update(s)
        if cut:  # executions cut last cycle (or before a resume) run again
            st.cut = []
            index = reg.index
            candidates.update(index[name] for name in cut if name in index)
        ordered = sorted(candidates)
    if not ordered:
        return []
    accepts = reg.accepts
    out: list[int] = []
    for i in ordered:
        accept = accepts[i]
        if accept is None:
            out.append(i)
            continue
        try:
            ok = accept(ctx)
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                raise
            # a failing accepts() counts as a failed execution of that suggestor
            msg = f"accepts raised {describe(exc)}"
            if record_failure(eng, st, reg.names[i], msg):
                return None
            continue
        if ok:
            out.append(i)
    return out
