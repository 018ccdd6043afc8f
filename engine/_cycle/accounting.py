"""What a run has used, measured against its budget, and the result it returns.

Elapsed time counts only the run's legs in flight (a paused run's clock stops);
budget status gives used / limit / percent per dimension (the budgets guide);
:class:`RunStats` is what stop policies see.
"""

from __future__ import annotations

from engine._cycle.run import Run
from engine.budget import BudgetStatus, RemainingBudget
from engine.policy import HistoryView, RunStats
from engine.result import RunResult
from engine.settings import EngineSettings
from engine.stop import StopReason


def elapsed_ms(settings: EngineSettings, run: Run) -> int:
    """Milliseconds the run has been in flight, over all its legs."""
    return run.spend.elapsed_before_ms + int((settings.clock() - run.spend.leg_started) * 1000)


def ms(seconds: float) -> int:
    """``seconds`` as whole milliseconds (rounded)."""
    return round(seconds * 1000)


def remaining_budget(settings: EngineSettings, run: Run) -> RemainingBudget:
    """What is left of the run's budgets now (see :class:`RemainingBudget`)."""
    b = run.budget
    tokens = cost = invocations = seconds = None
    if b.max_tokens:
        tokens = max(0, b.max_tokens - run.spend.usage.input_tokens - run.spend.usage.output_tokens)
    if b.max_cost_usd:
        cost = max(0.0, b.max_cost_usd - run.spend.usage.cost_usd)
    if b.max_invocations:
        invocations = max(0, b.max_invocations - run.spend.invocations)
    if b.max_seconds:
        seconds = max(0.0, b.max_seconds - elapsed_ms(settings, run) / 1000)
    used = run.spend.invocations_by
    per = {n: max(0, lim - used.get(n, 0)) for n, lim in b.per_suggestor.items() if lim}
    return RemainingBudget(tokens, cost, invocations, seconds, per, b)


def budget_status(run: Run, elapsed: int) -> BudgetStatus:
    """Used / limit / percent of every budget dimension, ``elapsed`` in ms."""
    used = {
        "cycles": run.cursor.cycle,
        "facts": len(run.facts.facts),
        "tokens": run.spend.usage.input_tokens + run.spend.usage.output_tokens,
        "seconds": elapsed / 1000,
        "cost_usd": run.spend.usage.cost_usd,
        "invocations": run.spend.invocations,
    }
    return BudgetStatus.compute(run.budget, used, run.spend.invocations_by)


def run_stats(settings: EngineSettings, run: Run) -> RunStats:
    """The run-scoped :class:`RunStats` that stop policies and ``on_stop`` see."""
    return RunStats(
        cycle=run.cursor.cycle,
        total_input_tokens=run.spend.usage.input_tokens,
        total_output_tokens=run.spend.usage.output_tokens,
        cost_usd=run.spend.usage.cost_usd,
        elapsed_ms=elapsed_ms(settings, run),
        consecutive_errors=max(run.spend.streaks.values(), default=0),
        last_error=run.spend.last_error,
        last_suggestors=run.cursor.last_suggestors,
        last_facts=tuple(f.id for f in run.cursor.cycle_new),
        last_fact_contents=tuple((f.key, f.content) for f in run.cursor.cycle_new),
        facts_count=len(run.context),
        invocations=run.spend.invocations,
        invocations_by_suggestor=dict(run.spend.invocations_by),
        invocation_history=HistoryView(run.spend.history, len(run.spend.history)),
    )


def run_result(
    settings: EngineSettings, run: Run, reason: StopReason, signals: tuple[StopReason, ...]
) -> RunResult:
    """The :class:`RunResult` of a run that stopped (or paused) with ``reason``."""
    spend = run.spend
    elapsed = spend.elapsed_before_ms  # a paused run's clock stopped (as elapsed_ms)
    if run.gating.pending_gate is None:
        elapsed += int((settings.clock() - spend.leg_started) * 1000)
    run.context.cycle = run.cursor.cycle
    return RunResult(
        run_id=run.run_id,
        stop_reason=reason,
        signals=signals,
        context=run.context,
        cycles=run.cursor.cycle,
        usage=run.spend.usage,
        budget_status=budget_status(run, elapsed),
        criteria=run.cursor.criteria_reports,
        duration_ms=elapsed,
        continuations=tuple(run.spend.continuations),
    )
