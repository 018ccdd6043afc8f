"""Evaluating the conditions over a run: invariants, stop policies and criteria.

Invariants are predicates over the whole context, checked by class (converge-core:
structural after every merge, semantic after a merge that added facts, acceptance
before a successful end). A check, policy or criterion that raises never crashes
a run: it counts as a violation, an ``Error(configuration)`` or an unmet criterion.
"""

from __future__ import annotations

import time
from typing import Any

from engine._cycle.accounting import run_stats
from engine._cycle.run import Run
from engine.criterion import Criterion, CriterionReport, Met, Unmet
from engine.invariant import Invariant
from engine.settings import EngineSettings
from engine.stop import (
    CriteriaMet,
    Error,
    ErrorCategory,
    InvariantClass,
    InvariantViolated,
    PolicyStopped,
    StopReason,
    stop_reason_to_dict,
)
from engine.store import AuditEvent


def check_invariants(
    settings: EngineSettings, run: Run, invariants: list[Invariant]
) -> list[StopReason]:
    """One ``InvariantViolated`` per failing invariant (recorded as an event)."""
    out: list[StopReason] = []
    for inv in invariants:
        try:
            violation = inv.check(run.context)
        except Exception as exc:
            reason = f"check raised {type(exc).__name__}: {exc}"
        else:
            if violation is None:
                continue
            reason = violation.reason
        sig = InvariantViolated(
            invariant_class=InvariantClass(inv.invariant_class), name=inv.name, reason=reason
        )
        if settings.store is not None or run.listener is not None:
            run.record(
                AuditEvent(
                    "invariant_violated", run.cursor.cycle, stop_reason_to_dict(sig), time.time()
                )
            )
        out.append(sig)
    return out


def evaluate_policies(settings: EngineSettings, run: Run) -> list[StopReason]:
    """The stops the custom and declarative stop policies decide on this cycle."""
    stats = run_stats(settings, run)
    out: list[StopReason] = []
    for policy in settings.stop_policies:
        try:
            decision = policy.evaluate(stats)
        except Exception as exc:
            out.append(
                Error(
                    message=f"stop policy {policy.id} raised {type(exc).__name__}: {exc}",
                    error_category=ErrorCategory.CONFIGURATION,
                )
            )
            continue
        if decision is None:
            continue
        if decision.reason is not None:
            out.append(decision.reason)
        else:
            out.append(
                PolicyStopped(policy_id=policy.id, code=decision.code, detail=decision.detail)
            )
    return out


def evaluate_criteria(settings: EngineSettings, run: Run) -> list[tuple[Criterion, Any]]:
    """Every criterion's result now; also kept as the run's criteria reports."""
    results: list[tuple[Criterion, Any]] = []
    for c in settings.criteria:
        try:
            results.append((c, c.evaluate(run.context)))
        except Exception as exc:
            results.append((c, Unmet(f"evaluate raised {type(exc).__name__}: {exc}")))
    run.cursor.judged(tuple(CriterionReport.of(c, r) for c, r in results))
    return results


def criteria_met_early(settings: EngineSettings, run: Run) -> list[StopReason]:
    """When every required criterion is met before a fixed point: ``CriteriaMet``,
    or the acceptance invariants it violates (a run never ends successfully past
    a failing acceptance invariant, as converge-core). Else nothing."""
    required = [c for c in settings.criteria if getattr(c, "required", True)]
    if not required:
        return []
    results = evaluate_criteria(settings, run)
    if all(isinstance(r, Met) for c, r in results if getattr(c, "required", True)):
        if settings.acceptance:
            violations = check_invariants(settings, run, settings.acceptance)
            if violations:
                return violations
        return [CriteriaMet(criteria=[c.id for c in required])]
    return []
