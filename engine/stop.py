"""The stop vocabulary: why a run ended, as one exhaustive, typed union.

Every run ends with exactly one :data:`StopReason` variant. The first thirteen
variants and their fields are converge-core's ``StopReason`` (two fields renamed
so that none shadows a common attribute: ``class`` is ``invariant_class`` and
``category`` is ``error_category``); the others come from the stop policies of
awaken and tirea, Cognesy's stop signals and the usual budget guide.

Each variant is a frozen pydantic model with:

- ``kind``: a stable snake_case machine code (tirea's termination code);
- ``category``: one of :class:`StopCategory`, which decides every predicate;
- ``priority``: lower is more urgent (Cognesy's stop-signal priorities); when
  several conditions fire at one check the most urgent becomes the stop reason;
- ``exit_code``: the exit status of ``converge run``;
- ``__str__``: one human line; ``explain()``: a paragraph on what it means and
  what to do next (recovery advice, as converge-core documents each variant).

JSON round-trips through :func:`parse_stop_reason` (the ``kind`` field is the
discriminator). Exhaustive handling::

    match reason:
        case Converged(): ...
        ...
        case _:
            assert_never(reason)
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from engine.safe_json import json_safe
from engine.stop_categories import EXIT_CODES, PRIORITIES, RESUMABLE
from engine.stop_categories import ErrorCategory as ErrorCategory  # re-exported
from engine.stop_categories import InvariantClass as InvariantClass
from engine.stop_categories import StopCategory as StopCategory

_PLAIN = (str, int, float, dict, list, tuple)


class _StopBase(BaseModel):
    """Behaviour shared by every variant; the data lives in the subclasses."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    category_: ClassVar[StopCategory]
    advice: ClassVar[str] = ""

    @model_validator(mode="before")
    @classmethod
    def _json_safe(cls, data: Any) -> Any:
        # a stop reason is written to the audit trail and read back: its strings are
        # valid UTF-8 and its nested data bounded, so every accepted reason round-trips
        if isinstance(data, dict):
            return {k: json_safe(v) if type(v) in _PLAIN else v for k, v in data.items()}
        return data

    @property
    def category(self) -> StopCategory:
        """The classification of this stop (see the table in docs/stop-reasons.md)."""
        return self.category_

    @property
    def priority(self) -> int:
        """Urgency when several conditions fire at once: lower wins (0 = error)."""
        return PRIORITIES[self.category_]

    @property
    def exit_code(self) -> int:
        """The exit status ``converge run`` returns for this stop."""
        return EXIT_CODES[self.category_]

    # The six predicates of converge-core, with the new variants joined by category.
    def is_success(self) -> bool:
        """True for the success and cancelled categories (a cancel is a graceful end)."""
        return self.category_ in (StopCategory.SUCCESS, StopCategory.CANCELLED)

    def is_budget_exhausted(self) -> bool:
        """True when a budget (cycles, facts, tokens, time, cost, invocations) ran out."""
        return self.category_ is StopCategory.BUDGET

    def is_validation_failure(self) -> bool:
        """True for an invariant violation, a rejected promotion or unmet criteria."""
        return self.category_ is StopCategory.VALIDATION

    def is_error(self) -> bool:
        """True for the error category: errors, error streaks and refusals."""
        return self.category_ is StopCategory.ERROR

    def is_hitl_pending(self) -> bool:
        """True when the run is paused at a human-in-the-loop gate."""
        return self.category_ is StopCategory.HITL

    def is_human_intervention_required(self) -> bool:
        """True when the run converged but a criterion is blocked on a human."""
        return self.category_ is StopCategory.HUMAN

    # Predicates of ours (Cognesy, awaken, the budget guide).
    def is_cancelled(self) -> bool:
        """True for a user cancel or a ``StopRun`` raised by a suggestor."""
        return self.category_ is StopCategory.CANCELLED

    def is_policy_stop(self) -> bool:
        """True when a stop policy (loop detection, a custom policy) ended the run."""
        return self.category_ is StopCategory.POLICY

    def was_force_stopped(self) -> bool:
        """True unless the run finished on its own or waits on a human (Cognesy)."""
        return self.category_ not in (StopCategory.SUCCESS, StopCategory.HITL, StopCategory.HUMAN)

    def is_resumable(self) -> bool:
        """True when the stored run can go on: a gate decision or more budget."""
        return self.category_ in RESUMABLE

    def explain(self) -> str:
        """A short paragraph: what happened, its category and what to do next."""
        return f"{self} [{self.kind_code()}, {self.category_.value}]. {self.advice}".strip()

    def kind_code(self) -> str:
        """The stable machine code of this variant (same as the ``kind`` field)."""
        kind: str = getattr(self, "kind")  # noqa: B009 - every subclass declares it
        return kind


# --- success -------------------------------------------------------------------


class Converged(_StopBase):
    """Fixed point reached: no suggestor had anything new to add."""

    kind: Literal["converged"] = "converged"
    category_ = StopCategory.SUCCESS
    advice = "The context is stable; its facts are the result."

    def __str__(self) -> str:
        return "converged: fixed point reached"


class CriteriaMet(_StopBase):
    """Every required success criterion is met (possibly before the fixed point)."""

    kind: Literal["criteria_met"] = "criteria_met"
    criteria: list[str]
    category_ = StopCategory.SUCCESS
    advice = "All required criteria hold; no need to continue."

    def __str__(self) -> str:
        return f"criteria met: {', '.join(self.criteria)}"


class Finished(_StopBase):
    """A stop-on-suggestor condition fired: that suggestor declared the job done."""

    kind: Literal["finished"] = "finished"
    suggestor: str
    message: str = ""
    category_ = StopCategory.SUCCESS
    advice = "A finishing suggestor ran (tirea's StopOnTool); the run ended as planned."

    def __str__(self) -> str:
        return f"finished by {self.suggestor}" + (f": {self.message}" if self.message else "")


# --- cancelled -----------------------------------------------------------------


class UserCancelled(_StopBase):
    """The run was cancelled from outside (``engine.cancel()``)."""

    kind: Literal["user_cancelled"] = "user_cancelled"
    category_ = StopCategory.CANCELLED
    advice = "A graceful end requested by the user; facts promoted so far are kept."

    def __str__(self) -> str:
        return "cancelled by the user"


class StopRequested(_StopBase):
    """A suggestor raised ``StopRun`` (Cognesy's ``AgentStopException``)."""

    kind: Literal["stop_requested"] = "stop_requested"
    source: str
    message: str
    context: dict[str, Any] = Field(default_factory=dict)
    category_ = StopCategory.CANCELLED
    advice = "A suggestor stopped the run on purpose; facts promoted before it are kept."

    def __str__(self) -> str:
        return f"stop requested by {self.source}: {self.message}"


# --- budget --------------------------------------------------------------------


class CycleBudgetExhausted(_StopBase):
    """``max_cycles`` cycles ran and the run had not converged."""

    kind: Literal["cycle_budget_exhausted"] = "cycle_budget_exhausted"
    cycles_executed: int
    limit: int
    category_ = StopCategory.BUDGET
    advice = (
        "No fixed point: more cycles help a run still adding facts; loop_detection stops a loop."
    )

    def __str__(self) -> str:
        return f"cycle budget exhausted: {self.cycles_executed}/{self.limit} cycles"


class FactBudgetExhausted(_StopBase):
    """The context holds more than ``max_facts`` facts."""

    kind: Literal["fact_budget_exhausted"] = "fact_budget_exhausted"
    facts_count: int
    limit: int
    category_ = StopCategory.BUDGET
    advice = "The context grew past its bound; raise max_facts or narrow the suggestors."

    def __str__(self) -> str:
        return f"fact budget exhausted: {self.facts_count} facts > limit {self.limit}"


class TokenBudgetExhausted(_StopBase):
    """Input plus output tokens used exceed ``max_tokens``."""

    kind: Literal["token_budget_exhausted"] = "token_budget_exhausted"
    tokens_consumed: int
    limit: int
    category_ = StopCategory.BUDGET
    advice = "LLM usage passed its bound; raise max_tokens or use cheaper suggestors."

    def __str__(self) -> str:
        return f"token budget exhausted: {self.tokens_consumed} tokens > limit {self.limit}"


class TimeBudgetExhausted(_StopBase):
    """Wall-clock time used (ms, pauses excluded) exceeds ``max_seconds``."""

    kind: Literal["time_budget_exhausted"] = "time_budget_exhausted"
    duration_ms: int
    limit_ms: int
    category_ = StopCategory.BUDGET
    advice = "The run took too long; in-flight async work was cancelled. Raise max_seconds."

    def __str__(self) -> str:
        # not ">": a run cancelled at the deadline has used exactly its limit
        return f"time budget exhausted: {self.duration_ms} ms used, limit {self.limit_ms} ms"


class CostBudgetExhausted(_StopBase):
    """The cost reported by suggestors (USD) exceeds ``max_cost_usd``."""

    kind: Literal["cost_budget_exhausted"] = "cost_budget_exhausted"
    cost_usd: float
    limit_usd: float
    category_ = StopCategory.BUDGET
    advice = "Spending passed its bound; raise max_cost_usd to go on."

    def __str__(self) -> str:
        return f"cost budget exhausted: ${self.cost_usd:.4f} > limit ${self.limit_usd:.4f}"


class InvocationBudgetExhausted(_StopBase):
    """A suggestor invocation would pass the total or per-suggestor limit."""

    kind: Literal["invocation_budget_exhausted"] = "invocation_budget_exhausted"
    invocations: int
    limit: int
    suggestor: str | None = None
    category_ = StopCategory.BUDGET
    advice = "Suggestors were invoked as often as allowed; raise the invocation budget."

    def __str__(self) -> str:
        scope = f" for {self.suggestor}" if self.suggestor else ""
        return f"invocation budget exhausted{scope}: {self.invocations}/{self.limit} invocations"


# --- validation ----------------------------------------------------------------


class InvariantViolated(_StopBase):
    """An invariant does not hold over the context (kept as it was, for forensics)."""

    kind: Literal["invariant_violated"] = "invariant_violated"
    invariant_class: InvariantClass
    name: str
    reason: str
    category_ = StopCategory.VALIDATION
    advice = "The context broke a rule; inspect its facts and lineage before retrying."

    def __str__(self) -> str:
        return f"{self.invariant_class.value} invariant {self.name!r} violated: {self.reason}"


class PromotionRejected(_StopBase):
    """A promotion gate rejected a proposal with ``on_reject="stop"``."""

    kind: Literal["promotion_rejected"] = "promotion_rejected"
    proposal_id: str
    reason: str
    category_ = StopCategory.VALIDATION
    advice = "A proposal failed validation; fix the suggestor or relax the gate."

    def __str__(self) -> str:
        return f"promotion rejected for proposal {self.proposal_id}: {self.reason}"


class CriteriaUnmet(_StopBase):
    """The run reached a fixed point with required criteria still unmet."""

    kind: Literal["criteria_unmet"] = "criteria_unmet"
    criteria: list[str]
    category_ = StopCategory.VALIDATION
    advice = "Nothing more can be derived and the goal is not reached; add suggestors or input."

    def __str__(self) -> str:
        return f"criteria unmet at fixed point: {', '.join(self.criteria)}"


# --- error ---------------------------------------------------------------------


class Error(_StopBase):
    """An unrecoverable error: a suggestor raised, the store failed, and so on."""

    kind: Literal["error"] = "error"
    message: str
    error_category: ErrorCategory
    category_ = StopCategory.ERROR
    advice = "Facts promoted before the error are kept; fix the cause and run again."

    def __str__(self) -> str:
        return f"error ({self.error_category.value}): {self.message}"


class ConsecutiveErrorsExceeded(_StopBase):
    """One suggestor failed ``limit`` times in a row (awaken's ConsecutiveErrors)."""

    kind: Literal["consecutive_errors_exceeded"] = "consecutive_errors_exceeded"
    errors: int
    limit: int
    last_error: str
    category_ = StopCategory.ERROR
    advice = "A suggestor keeps failing; its last error is attached."

    def __str__(self) -> str:
        return f"{self.errors} consecutive errors (limit {self.limit}); last: {self.last_error}"


class AgentRefused(_StopBase):
    """A suggestor explicitly declined to produce output (``Effect.refuse``)."""

    kind: Literal["agent_refused"] = "agent_refused"
    agent_id: str
    reason: str
    category_ = StopCategory.ERROR
    advice = "A suggestor refused; read its reason, then change the input or the suggestor."

    def __str__(self) -> str:
        return f"suggestor {self.agent_id} refused: {self.reason}"


# --- policy --------------------------------------------------------------------


class LoopDetected(_StopBase):
    """The recent suggestor invocations repeat periodically (loop detection)."""

    kind: Literal["loop_detected"] = "loop_detected"
    window: int
    pattern: list[str]
    category_ = StopCategory.POLICY
    advice = "Suggestors keep undoing each other; break the cycle or add a criterion."

    def __str__(self) -> str:
        return f"loop detected (window {self.window}): {' -> '.join(self.pattern)}"


class PolicyStopped(_StopBase):
    """A custom ``StopPolicy`` decided to stop (awaken's ``StopDecision::Stop``)."""

    kind: Literal["policy_stopped"] = "policy_stopped"
    policy_id: str
    code: str
    detail: str
    category_ = StopCategory.POLICY
    advice = "A stop policy fired; its code and detail say why."

    def __str__(self) -> str:
        return f"stopped by policy {self.policy_id} [{self.code}]: {self.detail}"


# --- human in the loop ---------------------------------------------------------


class HitlGatePending(_StopBase):
    """Paused at a human-in-the-loop gate, as converge-core's ``HitlGatePending``.

    Decide it with ``converge approve|reject`` or ``Engine.resume(gate_id, decision)``.
    """

    kind: Literal["hitl_gate_pending"] = "hitl_gate_pending"
    gate_id: str
    proposal_id: str
    summary: str
    agent_id: str
    cycle: int
    category_ = StopCategory.HITL
    advice = "Waiting for a human decision; approve or reject the gate to resume."

    def __str__(self) -> str:
        return (
            f"paused at gate {self.gate_id} (cycle {self.cycle}, {self.agent_id}): {self.summary}"
        )


class HumanInterventionRequired(_StopBase):
    """Converged, but required criteria are blocked on a human (with approval refs)."""

    kind: Literal["human_intervention_required"] = "human_intervention_required"
    criteria: list[str]
    approval_refs: list[str] = Field(default_factory=list)
    category_ = StopCategory.HUMAN
    advice = "The agents are done; a person must act on the approval refs."

    def __str__(self) -> str:
        refs = f" (refs: {', '.join(self.approval_refs)})" if self.approval_refs else ""
        return f"human intervention required for {', '.join(self.criteria)}{refs}"


StopReason = Annotated[
    Converged
    | CriteriaMet
    | Finished
    | UserCancelled
    | StopRequested
    | CycleBudgetExhausted
    | FactBudgetExhausted
    | TokenBudgetExhausted
    | TimeBudgetExhausted
    | CostBudgetExhausted
    | InvocationBudgetExhausted
    | InvariantViolated
    | PromotionRejected
    | CriteriaUnmet
    | Error
    | ConsecutiveErrorsExceeded
    | AgentRefused
    | LoopDetected
    | PolicyStopped
    | HitlGatePending
    | HumanInterventionRequired,
    Field(discriminator="kind"),
]
"""Why a run ended: exactly one of the 21 variants (a pydantic discriminated union)."""

STOP_REASON_ADAPTER = TypeAdapter[StopReason](StopReason, config=ConfigDict(defer_build=True))

ALL_VARIANTS: tuple[type[_StopBase], ...] = (
    Converged,
    CriteriaMet,
    Finished,
    UserCancelled,
    StopRequested,
    CycleBudgetExhausted,
    FactBudgetExhausted,
    TokenBudgetExhausted,
    TimeBudgetExhausted,
    CostBudgetExhausted,
    InvocationBudgetExhausted,
    InvariantViolated,
    PromotionRejected,
    CriteriaUnmet,
    Error,
    ConsecutiveErrorsExceeded,
    AgentRefused,
    LoopDetected,
    PolicyStopped,
    HitlGatePending,
    HumanInterventionRequired,
)
"""Every variant, in the order of the stop table (docs/stop-reasons.md is generated from it)."""


def parse_stop_reason(data: dict[str, Any] | str | bytes) -> StopReason:
    """Rebuild a :data:`StopReason` from its JSON (a dict, or a JSON string/bytes).

    Raises ``pydantic.ValidationError`` when ``kind`` is unknown or a field is wrong.
    """
    if isinstance(data, str | bytes):
        return STOP_REASON_ADAPTER.validate_json(data)
    return STOP_REASON_ADAPTER.validate_python(data)


def stop_reason_to_dict(reason: StopReason) -> dict[str, Any]:
    """The JSON-ready dict of a stop reason (``kind`` included)."""
    return reason.model_dump(mode="json")
