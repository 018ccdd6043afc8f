"""Stop judgement: which conditions fired after a merge, which one ends the run.

After each merge (docs/concepts.md (step 6)): structural invariants; no new fact is a
fixed point (acceptance invariants, then criteria decide the stop); otherwise
semantic invariants, the fact, token and cost budgets, stop policies and early
criteria. A cycle whose eligible executions did not all complete (cut by the time
budget, a cancel or the invocation budget: ``RunState.cut``) is never a fixed
point and judges no criterion: it ends with the stop that cut it (or goes on
under ``on_stop``), and the cut suggestors run again in the next cycle. Every
condition that fired is a *signal*; the most urgent (lowest priority, then
evaluation order) is the stop reason (Cognesy's stop signals).
``on_stop`` may continue a budget or policy stop (Cognesy's continuation
override); a continuation is recorded.
"""

from __future__ import annotations

import contextlib
import time

from engine.accounting import budget_status, elapsed_ms, ms, run_result, run_stats
from engine.budget import Budget
from engine.criterion import Blocked, Met
from engine.evaluation import (
    check_invariants,
    criteria_met_early,
    evaluate_criteria,
    evaluate_policies,
)
from engine.policy import Continue
from engine.recording import checkpoint, flush, record_pause, record_stop
from engine.result import ContinuationRecord, RunResult
from engine.run_state import RunState
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


def after_merge(eng: EngineSettings, st: RunState) -> RunResult | None:
    """Judge the cycle just merged: the run's result if it stops, None to go on."""
    pending = st.pending_signals
    signals: list[StopReason] = []
    if pending:
        signals.extend(pending)
        st.pending_signals = []
    new = st.cycle_new
    dirty = st.dirty
    for fact in new:
        dirty.add(fact.key)
    if eng.structural:
        signals.extend(check_invariants(eng, st, eng.structural))
    if st.cut:
        # some eligible execution was cut (its signal is pending): the cycle is not
        # complete, so it is no fixed point and no criterion is judged on it
        if new and eng.semantic:
            signals.extend(check_invariants(eng, st, eng.semantic))
        return judge_budgets(eng, st, signals, cut=True)
    if not new:
        if signals and not all(s.category in OVERRIDABLE for s in signals):
            return stop(eng, st, signals)
        return fixed_point(eng, st, signals)
    if eng.semantic:
        signals.extend(check_invariants(eng, st, eng.semantic))
    return judge_budgets(eng, st, signals)


def judge_budgets(
    eng: EngineSettings, st: RunState, signals: list[StopReason], *, cut: bool = False
) -> RunResult | None:
    """The rest of :func:`after_merge` once a cycle promoted facts: the fact, token
    and cost budgets, stop policies, early criteria; then the store and progress.
    A ``cut`` cycle (some eligible execution did not complete) judges no criterion,
    and no stop policy unless it promoted facts."""
    budget = st.budget
    ctx = st.context
    if budget.max_facts and len(ctx) > budget.max_facts:
        signals.append(FactBudgetExhausted(facts_count=len(ctx), limit=budget.max_facts))
    if budget.max_tokens:
        used = st.usage.input_tokens + st.usage.output_tokens
        if used > budget.max_tokens:
            signals.append(TokenBudgetExhausted(tokens_consumed=used, limit=budget.max_tokens))
    if budget.max_cost_usd and st.usage.cost_usd > budget.max_cost_usd:
        signals.append(
            CostBudgetExhausted(cost_usd=st.usage.cost_usd, limit_usd=budget.max_cost_usd)
        )
    if eng.stop_policies and (not cut or st.cycle_new):
        signals.extend(evaluate_policies(eng, st))
    if eng.criteria and not cut and not any(s.category is StopCategory.VALIDATION for s in signals):
        signals.extend(criteria_met_early(eng, st))
    if signals:
        stopped = stop_or_continue(eng, st, signals)
        if stopped is not None:
            return stopped
    if eng.store is not None:
        every = eng.checkpoint_every
        if every and st.cycle % every == 0:
            checkpoint(eng, st)
        elif st.events:
            flush(eng, st)
    if eng.progress is not None:
        eng.progress(st.cycle, budget_status(st, elapsed_ms(eng, st)).percent)
    return None


def fixed_point(eng: EngineSettings, st: RunState, signals: list[StopReason]) -> RunResult:
    """No new fact: acceptance invariants, then criteria decide the stop."""
    if eng.acceptance:
        signals.extend(check_invariants(eng, st, eng.acceptance))
    if eng.criteria:
        results = evaluate_criteria(eng, st)
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
    return stop(eng, st, signals)


def stop_or_continue(
    eng: EngineSettings, st: RunState, signals: list[StopReason]
) -> RunResult | None:
    """Stop with the most urgent signal, unless ``on_stop`` continues a budget/policy stop."""
    ordered = order(signals)
    top = ordered[0]
    if eng.on_stop is not None and top.category in OVERRIDABLE:
        keys = [signal_key(s) for s in ordered]
        if not any(k in st.exhausted_overrides for k in keys):
            decision = None
            with contextlib.suppress(Exception):
                decision = eng.on_stop(ordered, run_stats(eng, st))
            if isinstance(decision, Continue):
                _continue(eng, st, ordered, keys, decision)
                return None
    return stop(eng, st, ordered)


def _continue(
    eng: EngineSettings,
    st: RunState,
    ordered: list[StopReason],
    keys: list[str],
    decision: Continue,
) -> None:
    raised = decision.budget is not None and raises(st.budget, decision.budget, ordered)
    if decision.budget is not None:
        st.budget = decision.budget
    if not raised:
        st.exhausted_overrides.update(keys)
    st.continuations.append(ContinuationRecord(st.cycle, tuple(keys), decision.note, raised))
    if eng.store is not None:
        st.events.append(
            AuditEvent(
                "run_continued",
                st.cycle,
                {
                    "signals": [stop_reason_to_dict(s) for s in ordered],
                    "note": decision.note,
                    "budget": st.budget.model_dump(mode="json"),
                    "budget_raised": raised,
                },
                time.time(),
            )
        )
        flush(eng, st)


def stop(eng: EngineSettings, st: RunState, signals: list[StopReason]) -> RunResult:
    """End the run with the most urgent of ``signals``; record it; keep it if resumable."""
    ordered = order(signals)
    reason = ordered[0]
    if eng.criteria:  # as they stand at the stop, not at their last evaluation
        evaluate_criteria(eng, st)
    result = run_result(eng, st, reason, tuple(ordered))
    if eng.store is not None:
        written = record_stop(eng, st, ordered, result)
        if written is not result:
            return written
    if reason.is_resumable():
        eng.runs.stopped[st.run_id] = st
    return result


def pause(eng: EngineSettings, st: RunState, reason: HitlGatePending) -> RunResult:
    """Pause the run at a HITL gate: its clock stops, it is kept (and checkpointed)."""
    assert st.pending_gate is not None
    st.elapsed_before_ms = elapsed_ms(eng, st)
    if eng.criteria:
        evaluate_criteria(eng, st)
    result = run_result(eng, st, reason, (reason,))
    eng.runs.paused[reason.gate_id] = st
    if eng.store is not None:
        return record_pause(eng, st, reason, result)
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
