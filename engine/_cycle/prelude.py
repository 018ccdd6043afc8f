"""Scheduling: the checks before a cycle and its eligible suggestors (docs/concepts.md
steps 2 and 3).

Before a cycle: a cancel → ``UserCancelled``; the time budget used up →
``TimeBudgetExhausted``; ``max_cycles`` done → ``CycleBudgetExhausted``. The
eligible suggestors are the subscribers of the keys that changed in the previous
cycle (every key present in cycle 1), the dependency-free ones and those whose
execution was cut in the previous cycle (before a resume too), in registration
order, filtered by ``accepts(ctx)``; none is a fixed point. The step is
:class:`Prelude`.
"""

from __future__ import annotations

import time

from engine._cycle.accounting import elapsed_ms, ms
from engine._cycle.collect import describe, record_failure
from engine._cycle.cycling import Cycling, End, NextCycle, Step
from engine._cycle.execute import Execute
from engine._cycle.judge import fixed_point, stop, stop_or_continue
from engine.stop import CycleBudgetExhausted, TimeBudgetExhausted, UserCancelled
from engine.store import AuditEvent


class Prelude:
    """Before a cycle: a cancel, the time and cycle budgets, then the eligible
    suggestors; none is a fixed point."""

    __slots__ = ()

    def run(self, cycle: Cycling) -> Execute | End:
        """The :class:`Execute` of the eligible suggestors (registration order), or
        the run's end."""
        settings, run = cycle.settings, cycle.run
        if run.run_id in settings.runs.cancelled:
            return End(stop(settings, run, [UserCancelled()]))
        budget = run.budget
        if budget.max_seconds:
            elapsed = elapsed_ms(settings, run)
            if elapsed > budget.max_seconds * 1000:
                r = stop_or_continue(
                    settings,
                    run,
                    [TimeBudgetExhausted(duration_ms=elapsed, limit_ms=ms(budget.max_seconds))],
                )
                if r is not None:
                    return End(r)
        ctx = run.context
        ctx.cycle = run.cursor.cycle + 1
        # the eligible suggestors, in O(subscribers of the dirty keys + dependency-free
        # suggestors + cut ones): those whose execution was cut run again
        dirty, cut = run.cursor.take_wakers()
        reg = settings.registry
        ordered: list[int]
        if len(dirty) == 1 and not reg.dependency_free and not cut:
            # one changed key: its subscribers are already in registration order
            for key in dirty:
                ordered = reg.subscribers.get(key) or []
        else:
            candidates: set[int] = set(reg.dependency_free)
            for key in dirty:
                s = reg.subscribers.get(key)
                if s is not None:
                    candidates.update(s)
            if cut:  # executions cut last cycle (or before a resume) run again
                index = reg.index
                candidates.update(index[name] for name in cut if name in index)
            ordered = sorted(candidates)
        accepts = reg.accepts
        eligible: list[int] = []
        for i in ordered:
            accept = accepts[i]
            if accept is None:
                eligible.append(i)
                continue
            try:
                ok = accept(ctx)
            except BaseException as exc:
                if isinstance(exc, KeyboardInterrupt | SystemExit):
                    raise
                # a failing accepts() counts as a failed execution of that suggestor
                if record_failure(settings, run, reg.names[i], f"accepts raised {describe(exc)}"):
                    # on_error="stop"
                    return End(stop(settings, run, run.cursor.take_signals()))
                continue
            if ok:
                eligible.append(i)
        if not eligible:
            return End(fixed_point(settings, run, list(run.cursor.pending_signals)))
        if budget.max_cycles and run.cursor.cycle >= budget.max_cycles:
            run.cursor.put_back_wakers(dirty, cut)
            r = stop_or_continue(
                settings,
                run,
                [CycleBudgetExhausted(cycles_executed=run.cursor.cycle, limit=budget.max_cycles)],
            )
            if r is not None:
                ctx.cycle = run.cursor.cycle
                return End(r)
            run.cursor.take_wakers()
        run.cursor.advance()
        if settings.store is not None or run.listener is not None:
            names = reg.names
            run.record(
                AuditEvent(
                    "cycle_started",
                    run.cursor.cycle,
                    {"eligible": [names[i] for i in eligible]},
                    time.time(),
                )
            )
        return Execute(eligible)


PRELUDE = Prelude()


def next_step(answer: Step | NextCycle) -> Step:
    """The step a driver runs for a step's ``answer``: the step itself, or a
    :data:`PRELUDE` for :data:`~engine._cycle.cycling.NEXT_CYCLE`."""
    return PRELUDE if isinstance(answer, NextCycle) else answer
