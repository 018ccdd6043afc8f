"""A run's budget status as its page shows it: as its last stop recorded it, from its
checkpoint while it is paused, live from its events while it runs (the bars update
with each event, docs/inbox.md)."""

from __future__ import annotations

from typing import Any

from audit.queries import last_budget_status
from audit.store import SqlRunStore
from engine import Budget, ConvergeError
from engine.budget import BudgetStatus
from engine.status import RunStatus

__all__ = ["run_budget"]


def run_budget(
    store: SqlRunStore, run_id: str, events: list[Any], now: float
) -> BudgetStatus | None:
    """The run's budget status: as its last stop recorded it; for a paused run, its
    checkpoint's budget and the counters so far; for a running one, live (its leg's
    budget and what it used until ``now``, unix seconds: :func:`_live_budget`)."""
    row = store.run(run_id)
    if row.status == RunStatus.RUNNING:
        return _live_budget(row, events, now)
    status = last_budget_status(events)
    if status is not None:
        return status
    # a paused run has not stopped yet: its checkpoint's budget and the counters so far
    try:
        budget = Budget.model_validate(store.load_checkpoint(run_id)["budget"])
    except (ConvergeError, KeyError, ValueError):
        return None
    used = {
        "cycles": row.cycles,
        "facts": row.facts_count,
        "tokens": row.usage.input_tokens + row.usage.output_tokens,
        "seconds": (row.duration_ms or 0) / 1000,
        "cost_usd": row.usage.cost_usd,
    }
    return BudgetStatus.compute(budget, used, {})


def _live_budget(row: Any, events: list[Any], now: float) -> BudgetStatus | None:
    """A running run's budget status from its events: the budget its leg runs with
    (the last ``run_started`` or ``run_resumed`` that names one), its cycles and facts
    as committed, the tokens and cost its suggestors reported, and the seconds of its
    earlier legs (its last stop's) plus this leg's so far. None before it started."""
    budget, leg_start, earlier = None, None, 0.0
    tokens, cost, invocations = 0, 0.0, 0
    for e in events:
        p = e.payload
        if e.kind in ("run_started", "run_resumed"):
            leg_start = e.ts
            if isinstance(p.get("budget"), dict):
                budget = p["budget"]
        elif e.kind == "run_stopped" and isinstance(p.get("budget_status"), dict):
            seconds = p["budget_status"].get("dimensions", {}).get("seconds", {})
            earlier = float(seconds.get("used") or 0.0)
        elif e.kind in ("suggestor_executed", "usage_recorded"):
            i, o, c = [*(p.get("usage") or []), 0, 0, 0.0][:3]
            tokens, cost = tokens + int(i) + int(o), cost + float(c)
            invocations += e.kind == "suggestor_executed"
    if budget is None or leg_start is None:
        return None
    try:
        limits = Budget.model_validate(budget)
    except ValueError:
        return None
    used = {
        "cycles": row.cycles,
        "facts": row.facts_count,
        "tokens": tokens,
        "seconds": earlier + max(0.0, now - leg_start),
        "cost_usd": cost,
        "invocations": invocations,
    }
    return BudgetStatus.compute(limits, used, {})
