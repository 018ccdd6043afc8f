"""Stop judgement: which conditions fired after a merge, which one ends the run.

After each merge (docs/concepts.md (step 6)): structural invariants; no new fact is a
fixed point (acceptance invariants, then criteria decide the stop); otherwise
semantic invariants, the fact, token and cost budgets, stop policies and early
criteria. A cycle whose eligible executions did not all complete (cut by the time
budget, a cancel or the invocation budget: ``Run.cut``) is never a fixed
point and judges no criterion: it ends with the stop that cut it (or goes on
under ``on_stop``), and the cut suggestors run again in the next cycle. Every
condition that fired is a *signal*; the most urgent (lowest priority, then
evaluation order) is the stop reason (Cognesy's stop signals).
``on_stop`` may continue a budget or policy stop (Cognesy's continuation
override); a continuation is recorded. The step is :class:`Judge`.
"""

from __future__ import annotations

import contextlib
import time

from engine._cycle.accounting import budget_status, elapsed_ms, ms, run_result, run_stats
from engine._cycle.cycling import NEXT_CYCLE, Cycling, End, NextCycle
from engine._cycle.evaluation import (
    check_invariants,
    criteria_met_early,
    evaluate_criteria,
    evaluate_policies,
)
from engine._cycle.recording import checkpoint, flush, record_pause, record_stop
from engine._cycle.run import Run
from engine.budget import Budget
from engine.criterion import Blocked, Met
from engine.policy import Continue
from engine.result import ContinuationRecord, RunResult
from engine.settings import EngineSettings
from engine.stop import (
    Converged,
    CostBudgetExhausted,
    CriteriaMet,
    CriteriaUnmet,
    FactBudgetExhausted,
    HitlGatePending,
    HumanInterventionRequired,
    InvocationBudgetExhausted,
    PolicyStopped,
    StopCategory,
    StopReason,
    TimeBudgetExhausted,
    TokenBudgetExhausted,
    stop_reason_to_dict,
)
from engine.store import AuditEvent

CONVERGED = Converged()
"""The fixed point's stop (a frozen model with no field: one instance serves every run)."""

OVERRIDABLE = (StopCategory.BUDGET, StopCategory.POLICY)
"""The categories ``on_stop`` may continue."""

BUDGET_FIELDS: dict[str, str] = {
    "cycle_budget_exhausted": "max_cycles",
    "fact_budget_exhausted": "max_facts",
    "token_budget_exhausted": "max_tokens",
    "time_budget_exhausted": "max_seconds",
    "cost_budget_exhausted": "max_cost_usd",
    "invocation_budget_exhausted": "max_invocations",
}
"""The :class:`Budget` field behind each budget stop's ``kind``."""


class Judge:
    """The step that judges the merged cycle: invariants, budgets, policies,
    criteria (:func:`after_merge`); the run's end, or the next cycle."""

    __slots__ = ()

    def run(self, cycle: Cycling) -> NextCycle | End:
        """:data:`NEXT_CYCLE`, or the run's end."""
        run = cycle.run
        done = after_merge(cycle.settings, run)
        if done is not None:
            return End(done)
        if cycle.freezer.owned:
            cycle.freezer.promoted(len(run.cursor.cycle_new))
        return NEXT_CYCLE


JUDGE = Judge()


def after_merge(settings: EngineSettings, run: Run) -> RunResult | None:
    """Judge the cycle just merged: the run's result if it stops, None to go on."""
    cursor = run.cursor
    signals: list[StopReason] = cursor.take_signals() if cursor.pending_signals else []
    new = cursor.cycle_new
    if new:
        cursor.note_changed([fact.key for fact in new])
    if settings.structural:
        signals.extend(check_invariants(settings, run, settings.structural))
    if run.cursor.cut:
        # some eligible execution was cut (its signal is pending): the cycle is not
        # complete, so it is no fixed point and no criterion is judged on it
        if new and settings.semantic:
            signals.extend(check_invariants(settings, run, settings.semantic))
        return judge_budgets(settings, run, signals, cut=True)
    if not new:
        if signals and not all(s.category in OVERRIDABLE for s in signals):
            return stop(settings, run, signals)
        return fixed_point(settings, run, signals)
    if settings.semantic:
        signals.extend(check_invariants(settings, run, settings.semantic))
    return judge_budgets(settings, run, signals)


def judge_budgets(
    settings: EngineSettings, run: Run, signals: list[StopReason], *, cut: bool = False
) -> RunResult | None:
    """The rest of :func:`after_merge` once a cycle promoted facts: the fact, token
    and cost budgets, stop policies, early criteria; then the store and progress.
    A ``cut`` cycle (some eligible execution did not complete) judges no criterion,
    and no stop policy unless it promoted facts."""
    budget = run.budget
    count = len(run.facts.facts)
    if budget.max_facts and count > budget.max_facts:
        signals.append(FactBudgetExhausted(facts_count=count, limit=budget.max_facts))
    if budget.max_tokens:
        used = run.spend.usage.input_tokens + run.spend.usage.output_tokens
        if used > budget.max_tokens:
            signals.append(TokenBudgetExhausted(tokens_consumed=used, limit=budget.max_tokens))
    if budget.max_cost_usd and run.spend.usage.cost_usd > budget.max_cost_usd:
        signals.append(
            CostBudgetExhausted(cost_usd=run.spend.usage.cost_usd, limit_usd=budget.max_cost_usd)
        )
    if settings.stop_policies and (not cut or run.cursor.cycle_new):
        signals.extend(evaluate_policies(settings, run))
    if (
        settings.criteria
        and not cut
        and not any(s.category is StopCategory.VALIDATION for s in signals)
    ):
        signals.extend(criteria_met_early(settings, run))
    if signals:
        stopped = stop_or_continue(settings, run, signals)
        if stopped is not None:
            return stopped
    if settings.store is not None or run.listener is not None:
        every = settings.checkpoint_every
        if every and run.cursor.cycle % every == 0:
            checkpoint(settings, run)
        elif run.events:
            flush(settings, run)
    if settings.progress is not None:
        settings.progress(run.cursor.cycle, budget_status(run, elapsed_ms(settings, run)).percent)
    return None


def fixed_point(settings: EngineSettings, run: Run, signals: list[StopReason]) -> RunResult:
    """No new fact: acceptance invariants, then criteria decide the stop."""
    if settings.acceptance:
        signals.extend(check_invariants(settings, run, settings.acceptance))
    if settings.criteria:
        results = evaluate_criteria(settings, run)
        required = [(c, r) for c, r in results if getattr(c, "required", True)]
        if not required:
            signals.append(CONVERGED)
        elif all(isinstance(r, Met) for _, r in required):
            signals.append(CriteriaMet(criteria=[c.id for c, _ in required]))
        else:
            blocked = [(c, r) for c, r in required if isinstance(r, Blocked)]
            unmet = [c.id for c, r in required if not isinstance(r, Met | Blocked)]
            if unmet:
                signals.append(CriteriaUnmet(criteria=unmet))
            if blocked:
                signals.append(
                    HumanInterventionRequired(
                        criteria=[c.id for c, _ in blocked],
                        approval_refs=[r.approval_ref for _, r in blocked if r.approval_ref],
                    )
                )
    else:
        signals.append(CONVERGED)
    return stop(settings, run, signals)


def stop_or_continue(
    settings: EngineSettings, run: Run, signals: list[StopReason]
) -> RunResult | None:
    """Stop with the most urgent signal, unless ``on_stop`` continues a budget/policy stop."""
    ordered = order(signals)
    top = ordered[0]
    if settings.on_stop is not None and top.category in OVERRIDABLE:
        keys = [signal_key(s) for s in ordered]
        if not any(k in run.spend.exhausted_overrides for k in keys):
            decision = None
            with contextlib.suppress(Exception):
                decision = settings.on_stop(ordered, run_stats(settings, run))
            if isinstance(decision, Continue):
                _continue(settings, run, ordered, keys, decision)
                return None
    return stop(settings, run, ordered)


def _continue(
    settings: EngineSettings,
    run: Run,
    ordered: list[StopReason],
    keys: list[str],
    decision: Continue,
) -> None:
    raised = decision.budget is not None and raises(run.budget, decision.budget, ordered)
    if decision.budget is not None:
        run.adopt_budget(decision.budget)
    run.spend.continued(
        ContinuationRecord(run.cursor.cycle, tuple(keys), decision.note, raised),
        () if raised else keys,
    )
    if settings.store is not None or run.listener is not None:
        run.record(
            AuditEvent(
                "run_continued",
                run.cursor.cycle,
                {
                    "signals": [stop_reason_to_dict(s) for s in ordered],
                    "note": decision.note,
                    "budget": run.budget.model_dump(mode="json"),
                    "budget_raised": raised,
                },
                time.time(),
            )
        )
        flush(settings, run)


def stop(settings: EngineSettings, run: Run, signals: list[StopReason]) -> RunResult:
    """End the run with the most urgent of ``signals``; record it; keep it if resumable."""
    ordered = list(signals) if len(signals) == 1 else order(signals)
    reason = ordered[0]
    if settings.criteria:  # as they stand at the stop, not at their last evaluation
        evaluate_criteria(settings, run)
    result = run_result(settings, run, reason, tuple(ordered))
    if settings.store is not None or run.listener is not None:
        written = record_stop(settings, run, ordered, result)
        if written is not result:
            return written
    if reason.is_resumable():
        settings.runs.stopped[run.run_id] = run
    return result


def pause(settings: EngineSettings, run: Run, reason: HitlGatePending) -> RunResult:
    """Pause the run at a HITL gate: its clock stops, it is kept (and checkpointed)."""
    assert run.gating.pending_gate is not None
    run.spend.stop_clock(elapsed_ms(settings, run))
    if settings.criteria:
        evaluate_criteria(settings, run)
    result = run_result(settings, run, reason, (reason,))
    settings.runs.paused[reason.gate_id] = run
    if settings.store is not None or run.listener is not None:
        return record_pause(settings, run, reason, result)
    return result


def order(signals: list[StopReason]) -> list[StopReason]:
    """Most urgent first: priority, then evaluation order (sort is stable); no repeats."""
    if len(signals) == 1:  # the usual stop: nothing to compare or sort
        return list(signals)
    seen: set[str] = set()
    unique: list[StopReason] = []
    for s in signals:
        k = s.model_dump_json()
        if k not in seen:
            seen.add(k)
            unique.append(s)
    return sorted(unique, key=lambda s: s.priority)


def signal_key(s: StopReason) -> str:
    """What identifies a continued signal (one continuation per budget or policy)."""
    if isinstance(s, PolicyStopped):
        return f"{s.kind}:{s.policy_id}"
    return s.kind_code()


def raises(old: Budget, new: Budget, signals: list[StopReason]) -> bool:
    """True when ``new`` raises the limit of every budget dimension that fired."""
    fired = [s for s in signals if s.kind_code() in BUDGET_FIELDS]
    if not fired:
        return False
    for s in fired:
        before: float | None
        after: float | None
        if isinstance(s, InvocationBudgetExhausted) and s.suggestor is not None:
            before = old.per_suggestor.get(s.suggestor) or None
            after = new.per_suggestor.get(s.suggestor) or None
        else:
            fld = BUDGET_FIELDS[s.kind_code()]
            before, after = old.limit(fld), new.limit(fld)
        # a signal whose limit is not the budget's came from a stop policy
        # (gates.policies): raising the budget cannot lift it
        if before is None or not _same_limit(s, before):
            return False
        if after is not None and after <= before:
            return False
    return True


def _same_limit(signal: StopReason, limit: float) -> bool:
    """True when a budget signal's own limit is ``limit`` (the budget's, in its unit)."""
    if isinstance(signal, TimeBudgetExhausted):
        return signal.limit_ms == ms(limit)
    if isinstance(signal, CostBudgetExhausted):
        return abs(signal.limit_usd - limit) < 1e-9
    own = getattr(signal, "limit", None)
    return own is None or own == limit
