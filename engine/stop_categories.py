"""The classification of stops: categories, their priorities and exit codes.

Every :data:`engine.stop.StopReason` variant belongs to exactly one
:class:`StopCategory`, which decides its predicates, its priority (lower is more
urgent, Cognesy's stop-signal priorities) and the exit code of ``converge run``
(docs/stop-reasons.md). :class:`InvariantClass` and :class:`ErrorCategory` qualify the
``InvariantViolated`` and ``Error`` variants (converge-core's enums).
"""

from __future__ import annotations

from enum import StrEnum


class StopCategory(StrEnum):
    """The classification of a stop; each variant belongs to exactly one."""

    SUCCESS = "success"
    CANCELLED = "cancelled"
    BUDGET = "budget"
    VALIDATION = "validation"
    ERROR = "error"
    POLICY = "policy"
    HITL = "hitl"
    HUMAN = "human"


class InvariantClass(StrEnum):
    """When an invariant is checked (converge-core's three classes).

    ``structural`` after every merge, ``semantic`` after every merge that added
    facts, ``acceptance`` before a run may end successfully.
    """

    STRUCTURAL = "structural"
    SEMANTIC = "semantic"
    ACCEPTANCE = "acceptance"


class ErrorCategory(StrEnum):
    """Why an :class:`Error` happened: converge-core's five, plus two of ours.

    ``suggestor``: a suggestor's own code raised or returned garbage;
    ``storage``: the audit store failed.
    """

    SUGGESTOR = "suggestor"
    STORAGE = "storage"
    EXTERNAL = "external"
    RESOURCE = "resource"
    CONFIGURATION = "configuration"
    INTERNAL = "internal"
    UNKNOWN = "unknown"


EXIT_CODES: dict[StopCategory, int] = {
    StopCategory.SUCCESS: 0,
    StopCategory.CANCELLED: 130,
    StopCategory.BUDGET: 3,
    StopCategory.VALIDATION: 4,
    StopCategory.ERROR: 5,
    StopCategory.POLICY: 6,
    StopCategory.HITL: 10,
    StopCategory.HUMAN: 11,
}

PRIORITIES: dict[StopCategory, int] = {
    StopCategory.ERROR: 0,
    StopCategory.VALIDATION: 1,
    StopCategory.CANCELLED: 2,
    StopCategory.BUDGET: 3,
    StopCategory.POLICY: 4,
    StopCategory.HITL: 5,
    StopCategory.HUMAN: 6,
    StopCategory.SUCCESS: 7,
}

RESUMABLE = frozenset(
    {StopCategory.BUDGET, StopCategory.POLICY, StopCategory.HITL, StopCategory.CANCELLED}
)

STOP_KINDS: dict[str, StopCategory] = {
    "converged": StopCategory.SUCCESS,
    "criteria_met": StopCategory.SUCCESS,
    "finished": StopCategory.SUCCESS,
    "user_cancelled": StopCategory.CANCELLED,
    "stop_requested": StopCategory.CANCELLED,
    "cycle_budget_exhausted": StopCategory.BUDGET,
    "fact_budget_exhausted": StopCategory.BUDGET,
    "token_budget_exhausted": StopCategory.BUDGET,
    "time_budget_exhausted": StopCategory.BUDGET,
    "cost_budget_exhausted": StopCategory.BUDGET,
    "invocation_budget_exhausted": StopCategory.BUDGET,
    "invariant_violated": StopCategory.VALIDATION,
    "promotion_rejected": StopCategory.VALIDATION,
    "criteria_unmet": StopCategory.VALIDATION,
    "error": StopCategory.ERROR,
    "consecutive_errors_exceeded": StopCategory.ERROR,
    "agent_refused": StopCategory.ERROR,
    "loop_detected": StopCategory.POLICY,
    "policy_stopped": StopCategory.POLICY,
    "hitl_gate_pending": StopCategory.HITL,
    "human_intervention_required": StopCategory.HUMAN,
}
"""Every stop variant's ``kind`` and its category, in the order of the stop table
(:data:`engine.stop.ALL_VARIANTS`; tests/test_stop_reasons.py checks they agree): what
a reader that prints kinds (``converge runs --kind``) knows without building the
stop models."""
