"""converge's engine: the vocabulary of a run and the cycle loop.

Everything a user needs to write suggestors and run them is importable from here.

Each name is imported from its module on first use (PEP 562: ``__getattr__``), so
``from engine import ConvergeError`` does not import the cycle loop and a command
that only reads a store does not pay for it; the imports under ``TYPE_CHECKING``
name each one's home.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# imported now: the submodule engine.suggestor would otherwise shadow the decorator
from engine.suggestor import suggestor

if TYPE_CHECKING:
    from engine._cycle.start import new_run_id
    from engine.budget import Budget, BudgetStatus, DimensionStatus, RemainingBudget
    from engine.context import Context
    from engine.criterion import Blocked, Criterion, CriterionReport, CriterionResult, Met, Unmet
    from engine.effect import Effect, Usage
    from engine.engine import Engine, OnStop
    from engine.errors import (
        ChainError,
        ConfigurationError,
        ConvergeError,
        CorruptRow,
        ExecutorUnavailable,
        GateAlreadyDecided,
        GateExpired,
        GateNotFound,
        ImportReferenceError,
        InvalidRunId,
        ResumeError,
        RunBusy,
        RunFinished,
        RunNotFound,
        RunSuperseded,
        SchemaVersionError,
        StopRun,
        StoreError,
        TamperedRow,
    )
    from engine.events import RunEvent
    from engine.executor import CycleWork, Executor
    from engine.facts import Fact, Proposal, Provenance, content_key, fact_from_dict, fact_to_dict
    from engine.hashing.merkle import facts_root
    from engine.hitl import GateDecision, HitlPolicy
    from engine.invariant import Invariant, Violation
    from engine.policy import Continue, RunStats, StopDecision, StopPolicy
    from engine.promotion import PromotionGate, Rejection
    from engine.references import resolve_reference
    from engine.result import ContinuationRecord, RunResult
    from engine.run_ids import check_run_id
    from engine.status import GateStatus, RunStatus
    from engine.stop import (
        AgentRefused,
        ConsecutiveErrorsExceeded,
        Converged,
        CostBudgetExhausted,
        CriteriaMet,
        CriteriaUnmet,
        CycleBudgetExhausted,
        Error,
        FactBudgetExhausted,
        Finished,
        HitlGatePending,
        HumanInterventionRequired,
        InvariantViolated,
        InvocationBudgetExhausted,
        LoopDetected,
        PolicyStopped,
        PromotionRejected,
        StopReason,
        StopRequested,
        TimeBudgetExhausted,
        TokenBudgetExhausted,
        UserCancelled,
        parse_stop_reason,
    )
    from engine.stop_categories import ErrorCategory, InvariantClass, StopCategory
    from engine.store import (
        AuditEvent,
        BatchItem,
        Claim,
        GateRecord,
        PromotedFacts,
        RunHeader,
        RunOutcome,
        RunStore,
        expand_events,
    )
    from engine.suggestor import FunctionSuggestor, Suggestor

_WHERE: dict[str, str] = {
    "new_run_id": "engine._cycle.start",
    "Budget": "engine.budget",
    "BudgetStatus": "engine.budget",
    "DimensionStatus": "engine.budget",
    "RemainingBudget": "engine.budget",
    "Context": "engine.context",
    "Blocked": "engine.criterion",
    "Criterion": "engine.criterion",
    "CriterionReport": "engine.criterion",
    "CriterionResult": "engine.criterion",
    "Met": "engine.criterion",
    "Unmet": "engine.criterion",
    "Effect": "engine.effect",
    "Usage": "engine.effect",
    "Engine": "engine.engine",
    "OnStop": "engine.engine",
    "ChainError": "engine.errors",
    "ConfigurationError": "engine.errors",
    "ConvergeError": "engine.errors",
    "CorruptRow": "engine.errors",
    "ExecutorUnavailable": "engine.errors",
    "GateAlreadyDecided": "engine.errors",
    "GateExpired": "engine.errors",
    "GateNotFound": "engine.errors",
    "ImportReferenceError": "engine.errors",
    "InvalidRunId": "engine.errors",
    "ResumeError": "engine.errors",
    "RunBusy": "engine.errors",
    "RunFinished": "engine.errors",
    "RunNotFound": "engine.errors",
    "RunSuperseded": "engine.errors",
    "SchemaVersionError": "engine.errors",
    "StopRun": "engine.errors",
    "StoreError": "engine.errors",
    "TamperedRow": "engine.errors",
    "RunEvent": "engine.events",
    "CycleWork": "engine.executor",
    "Executor": "engine.executor",
    "Fact": "engine.facts",
    "Proposal": "engine.facts",
    "Provenance": "engine.facts",
    "content_key": "engine.facts",
    "fact_from_dict": "engine.facts",
    "fact_to_dict": "engine.facts",
    "facts_root": "engine.hashing.merkle",
    "GateDecision": "engine.hitl",
    "HitlPolicy": "engine.hitl",
    "Invariant": "engine.invariant",
    "Violation": "engine.invariant",
    "Continue": "engine.policy",
    "RunStats": "engine.policy",
    "StopDecision": "engine.policy",
    "StopPolicy": "engine.policy",
    "PromotionGate": "engine.promotion",
    "Rejection": "engine.promotion",
    "resolve_reference": "engine.references",
    "ContinuationRecord": "engine.result",
    "RunResult": "engine.result",
    "check_run_id": "engine.run_ids",
    "GateStatus": "engine.status",
    "RunStatus": "engine.status",
    "AgentRefused": "engine.stop",
    "ConsecutiveErrorsExceeded": "engine.stop",
    "Converged": "engine.stop",
    "CostBudgetExhausted": "engine.stop",
    "CriteriaMet": "engine.stop",
    "CriteriaUnmet": "engine.stop",
    "CycleBudgetExhausted": "engine.stop",
    "Error": "engine.stop",
    "ErrorCategory": "engine.stop_categories",
    "FactBudgetExhausted": "engine.stop",
    "Finished": "engine.stop",
    "HitlGatePending": "engine.stop",
    "HumanInterventionRequired": "engine.stop",
    "InvariantClass": "engine.stop_categories",
    "InvariantViolated": "engine.stop",
    "InvocationBudgetExhausted": "engine.stop",
    "LoopDetected": "engine.stop",
    "PolicyStopped": "engine.stop",
    "PromotionRejected": "engine.stop",
    "StopCategory": "engine.stop_categories",
    "StopReason": "engine.stop",
    "StopRequested": "engine.stop",
    "TimeBudgetExhausted": "engine.stop",
    "TokenBudgetExhausted": "engine.stop",
    "UserCancelled": "engine.stop",
    "parse_stop_reason": "engine.stop",
    "AuditEvent": "engine.store",
    "BatchItem": "engine.store",
    "Claim": "engine.store",
    "GateRecord": "engine.store",
    "PromotedFacts": "engine.store",
    "RunHeader": "engine.store",
    "RunOutcome": "engine.store",
    "RunStore": "engine.store",
    "expand_events": "engine.store",
    "FunctionSuggestor": "engine.suggestor",
    "Suggestor": "engine.suggestor",
    "suggestor": "engine.suggestor",
}
"""Each public name → the module it is imported from."""

__all__ = [
    "AgentRefused",
    "AuditEvent",
    "BatchItem",
    "Blocked",
    "Budget",
    "BudgetStatus",
    "ChainError",
    "Claim",
    "ConfigurationError",
    "ConsecutiveErrorsExceeded",
    "Context",
    "ContinuationRecord",
    "Continue",
    "ConvergeError",
    "Converged",
    "CorruptRow",
    "CostBudgetExhausted",
    "CriteriaMet",
    "CriteriaUnmet",
    "Criterion",
    "CriterionReport",
    "CriterionResult",
    "CycleBudgetExhausted",
    "CycleWork",
    "DimensionStatus",
    "Effect",
    "Engine",
    "Error",
    "ErrorCategory",
    "Executor",
    "ExecutorUnavailable",
    "Fact",
    "FactBudgetExhausted",
    "Finished",
    "FunctionSuggestor",
    "GateAlreadyDecided",
    "GateDecision",
    "GateExpired",
    "GateNotFound",
    "GateRecord",
    "GateStatus",
    "HitlGatePending",
    "HitlPolicy",
    "HumanInterventionRequired",
    "ImportReferenceError",
    "InvalidRunId",
    "Invariant",
    "InvariantClass",
    "InvariantViolated",
    "InvocationBudgetExhausted",
    "LoopDetected",
    "Met",
    "OnStop",
    "PolicyStopped",
    "PromotedFacts",
    "PromotionGate",
    "PromotionRejected",
    "Proposal",
    "Provenance",
    "Rejection",
    "RemainingBudget",
    "ResumeError",
    "RunBusy",
    "RunEvent",
    "RunFinished",
    "RunHeader",
    "RunNotFound",
    "RunOutcome",
    "RunResult",
    "RunStats",
    "RunStatus",
    "RunStore",
    "RunSuperseded",
    "SchemaVersionError",
    "StopCategory",
    "StopDecision",
    "StopPolicy",
    "StopReason",
    "StopRequested",
    "StopRun",
    "StoreError",
    "Suggestor",
    "TamperedRow",
    "TimeBudgetExhausted",
    "TokenBudgetExhausted",
    "Unmet",
    "Usage",
    "UserCancelled",
    "Violation",
    "check_run_id",
    "content_key",
    "expand_events",
    "fact_from_dict",
    "fact_to_dict",
    "facts_root",
    "new_run_id",
    "parse_stop_reason",
    "resolve_reference",
    "suggestor",
]


def __getattr__(name: str) -> Any:
    """``engine.NAME``: imported from its module on first use (then kept)."""
    home = _WHERE.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
