"""What a run has used, measured against its budget, and the result it returns.

Elapsed time counts only the run's legs in flight (a paused run's clock stops);
budget status gives used / limit / percent per dimension (the budgets guide);
:class:`RunStats` is what stop policies see.
"""

from __future__ import annotations

from engine.budget import BudgetStatus, RemainingBudget
from engine.policy import HistoryView, RunStats
from engine.result import RunResult
from engine.run_state import RunState
from engine.settings import EngineSettings
from engine.stop import StopReason


def elapsed_ms(eng: EngineSettings, st: RunState) -> int:
    """Milliseconds the run has been in flight, over all its legs."""
    return st.elapsed_before_ms + int((eng.clock() - st.leg_started) * 1000)


def ms(seconds: float) -> int:
    """``seconds`` as whole milliseconds (rounded)."""
    return round(seconds * 1000)


def remaining_budget(eng: EngineSettings, st: RunState) -> RemainingBudget:
    """What is left of the run's budgets now (see :class:`RemainingBudget`)."""
    b = st.budget
    tokens = cost = invocations = seconds = None
    if b.max_tokens:
        tokens = max(0, b.max_tokens - st.usage.input_tokens - st.usage.output_tokens)
    if b.max_cost_usd:
        cost = max(0.0, b.max_cost_usd - st.usage.cost_usd)
    if b.max_invocations:
        invocations = max(0, b.max_invocations - st.invocations)
    if b.max_seconds:
        seconds = max(0.0, b.max_seconds - elapsed_ms(eng, st) / 1000)
    used = st.invocations_by
    per = {n: max(0, lim - used.get(n, 0)) for n, lim in b.per_suggestor.items() if lim}
    return RemainingBudget(tokens, cost, invocations, seconds, per, b)


def budget_status(st: RunState, elapsed: int) -> BudgetStatus:
    """Used / limit / percent of every budget dimension, ``elapsed`` in ms."""
    used = {
        "cycles": st.cycle,
        "facts": len(st.context),
        "tokens": st.usage.input_tokens + st.usage.output_tokens,
        "seconds": elapsed / 1000,
        "cost_usd": st.usage.cost_usd,
        "invocations": st.invocations,
    }
    return BudgetStatus.compute(st.budget, used, st.invocations_by)


def run_stats(eng: EngineSettings, st: RunState) -> RunStats:
    """The run-scoped :class:`RunStats` that stop policies and ``on_stop`` see."""
    return RunStats(
        cycle=st.cycle,
        total_input_tokens=st.usage.input_tokens,
        total_output_tokens=st.usage.output_tokens,
        cost_usd=st.usage.cost_usd,
        elapsed_ms=elapsed_ms(eng, st),
        consecutive_errors=max(st.streaks.values(), default=0),
        last_error=st.last_error,
        last_suggestors=st.last_suggestors,
        last_facts=tuple(f.id for f in st.cycle_new),
        last_fact_contents=tuple((f.key, f.content) for f in st.cycle_new),
        facts_count=len(st.context),
        invocations=st.invocations,
        invocations_by_suggestor=dict(st.invocations_by),
        invocation_history=HistoryView(st.history, len(st.history)),
    )


def run_result(
    eng: EngineSettings, st: RunState, reason: StopReason, signals: tuple[StopReason, ...]
) -> RunResult:
    """The :class:`RunResult` of a run that stopped (or paused) with ``reason``."""
    elapsed = elapsed_ms(eng, st) if st.pending_gate is None else st.elapsed_before_ms
    st.context.cycle = st.cycle
    return RunResult(
        run_id=st.run_id,
        stop_reason=reason,
        signals=signals,
        context=st.context,
        cycles=st.cycle,
        usage=st.usage,
        budget_status=budget_status(st, elapsed),
        criteria=st.criteria_reports,
        duration_ms=elapsed,
        continuations=tuple(st.continuations),
    )
