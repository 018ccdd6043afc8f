"""The declarative stop conditions: one pydantic spec per kind, and their union.

A job file's ``stop_conditions:`` entries are :data:`StopConditionSpec` values: a
union discriminated on ``type`` (awaken's ``StopConditionSpec``, tirea's
``stop_on_tool`` and ``loop_detection``, the budgets guide's cost and invocation
budgets), plus ``{policy: "module:Attr"}`` for a custom :class:`StopPolicy`. Each
spec's ``to_policy()`` builds its policy (:mod:`gates.stop_policies`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from engine import stop
from engine.budget import check_per_suggestor
from engine.errors import ConfigurationError
from engine.policy import StopPolicy
from engine.references import resolve_reference
from gates import stop_policies as policies

__all__ = [
    "SPEC_TYPES",
    "ConsecutiveErrorsSpec",
    "ContentMatchSpec",
    "CostBudgetSpec",
    "CustomPolicySpec",
    "InvocationBudgetSpec",
    "LoopDetectionSpec",
    "MaxRoundsSpec",
    "SpecBase",
    "StopConditionSpec",
    "StopOnSuggestorSpec",
    "StopOnToolSpec",
    "TimeoutSpec",
    "TokenBudgetSpec",
]


class SpecBase(BaseModel):
    """Base of the spec models: frozen, unknown fields rejected, ``to_policy()``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    yields: ClassVar[type[BaseModel]]
    """The ``StopReason`` variant the policy of this kind stops with."""
    origin: ClassVar[str]
    """Where the kind comes from (awaken, tirea, Cognesy, the budgets guide)."""

    def to_policy(self) -> StopPolicy:
        """The policy implementing this spec."""
        raise NotImplementedError


class MaxRoundsSpec(SpecBase):
    """``{type: max_rounds, rounds: N}``: at most N cycles (lowers to ``max_cycles``)."""

    type: Literal["max_rounds"]
    rounds: int = Field(ge=0, description="cycles; 0 disables")
    yields = stop.CycleBudgetExhausted
    origin = "awaken, tirea"

    def to_policy(self) -> StopPolicy:
        """A :class:`MaxRounds` policy."""
        return policies.MaxRounds(self.rounds)


class TimeoutSpec(SpecBase):
    """``{type: timeout, seconds: S}``: wall-clock limit (lowers to ``max_seconds``)."""

    type: Literal["timeout"]
    seconds: float = Field(ge=0, description="seconds of wall-clock time, pauses excluded")
    yields = stop.TimeBudgetExhausted
    origin = "awaken, tirea"

    def to_policy(self) -> StopPolicy:
        """A :class:`Timeout` policy."""
        return policies.Timeout(self.seconds)


class TokenBudgetSpec(SpecBase):
    """``{type: token_budget, max_total: N}``: input + output tokens."""

    type: Literal["token_budget"]
    max_total: int = Field(ge=0, description="tokens, input + output; 0 disables")
    yields = stop.TokenBudgetExhausted
    origin = "awaken"

    def to_policy(self) -> StopPolicy:
        """A :class:`TokenBudget` policy."""
        return policies.TokenBudget(self.max_total)


class ConsecutiveErrorsSpec(SpecBase):
    """``{type: consecutive_errors, max: N}``: one suggestor failing N times in a row."""

    type: Literal["consecutive_errors"]
    max: int = Field(ge=0, description="failed executions in a row; 0 disables")
    yields = stop.ConsecutiveErrorsExceeded
    origin = "awaken"

    def to_policy(self) -> StopPolicy:
        """A :class:`ConsecutiveErrors` policy."""
        return policies.ConsecutiveErrors(self.max)


class StopOnSuggestorSpec(SpecBase):
    """``{type: stop_on_suggestor, name: S}``: finish after suggestor S ran."""

    type: Literal["stop_on_suggestor"]
    name: str = Field(min_length=1, description="a registered suggestor name")
    yields = stop.Finished
    origin = "tirea"

    def to_policy(self) -> StopPolicy:
        """A :class:`StopOnSuggestor` policy."""
        return policies.StopOnSuggestor(self.name)


class StopOnToolSpec(SpecBase):
    """``{type: stop_on_tool, tool_name: S}``: tirea's spelling of ``stop_on_suggestor``."""

    type: Literal["stop_on_tool"]
    tool_name: str = Field(min_length=1, description="a registered suggestor name")
    yields = stop.Finished
    origin = "tirea"

    def to_policy(self) -> StopPolicy:
        """A :class:`StopOnSuggestor` policy (the id says ``stop_on_tool``)."""
        return policies.StopOnSuggestor(self.tool_name, id="stop_on_tool")


class ContentMatchSpec(SpecBase):
    """``{type: content_match, pattern: R, key: K}``: a regex over new facts' content."""

    type: Literal["content_match"]
    pattern: str = Field(min_length=1, description="Python regex, searched (re.search)")
    key: str | None = Field(default=None, description="only facts of this key; None = all")
    yields = stop.PolicyStopped
    origin = "awaken"

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"invalid regular expression {value!r}: {exc}") from exc
        return value

    def to_policy(self) -> StopPolicy:
        """A :class:`ContentMatch` policy."""
        return policies.ContentMatch(self.pattern, self.key)


class LoopDetectionSpec(SpecBase):
    """``{type: loop_detection, window: W}``: the last 2 * W invocations repeat."""

    type: Literal["loop_detection"]
    window: int = Field(ge=0, description="invocations; longest period caught; 0 disables")
    yields = stop.LoopDetected
    origin = "tirea, budgets guide"

    def to_policy(self) -> StopPolicy:
        """A :class:`LoopDetection` policy."""
        return policies.LoopDetection(self.window)


class CostBudgetSpec(SpecBase):
    """``{type: cost_budget, max_usd: X}``: the cost suggestors report, in USD."""

    type: Literal["cost_budget"]
    max_usd: float = Field(ge=0, description="USD; 0 disables")
    yields = stop.CostBudgetExhausted
    origin = "budgets guide"

    def to_policy(self) -> StopPolicy:
        """A :class:`CostBudget` policy."""
        return policies.CostBudget(self.max_usd)


class InvocationBudgetSpec(SpecBase):
    """``{type: invocation_budget, max_total: N, per_suggestor: {name: N}}``.

    Lowers to ``Budget.max_invocations`` / ``Budget.per_suggestor``.
    """

    type: Literal["invocation_budget"]
    max_total: int = Field(default=0, ge=0, description="invocations in total; 0 disables")
    per_suggestor: dict[str, int] = Field(
        default_factory=dict, description="invocations per suggestor name; 0 disables one"
    )
    _non_negative = field_validator("per_suggestor")(check_per_suggestor)
    yields = stop.InvocationBudgetExhausted
    origin = "budgets guide"

    def to_policy(self) -> StopPolicy:
        """An :class:`InvocationBudget` policy."""
        return policies.InvocationBudget(self.max_total, dict(self.per_suggestor))


class CustomPolicySpec(SpecBase):
    """``{policy: "module:Attr"}``: a custom :class:`StopPolicy` (``type: policy`` implied).

    The reference is resolved with ``engine.references.resolve_reference`` (a class or a
    factory is called with no arguments). Its stops are ``PolicyStopped(policy_id,
    code, detail)`` unless its decision carries a ``reason``.
    """

    type: Literal["policy"] = "policy"
    policy: str = Field(pattern=r"^[\w.]+:[\w.]+$", description="'module:Attr' reference")
    yields = stop.PolicyStopped
    origin = "awaken, tirea"

    def to_policy(self) -> StopPolicy:
        """Import the reference; raises ``ConfigurationError`` if it is not a StopPolicy."""
        obj = resolve_reference(self.policy)
        if not isinstance(obj, StopPolicy) or not isinstance(getattr(obj, "id", None), str):
            raise ConfigurationError(
                f"policy {self.policy!r} is not a StopPolicy (needs an 'id' string and "
                "evaluate(stats) -> StopDecision | None)"
            )
        return obj


def _tag_custom_policy(data: Any) -> Any:
    # ``{policy: "m:A"}`` carries no ``type``: give it the ``policy`` tag.
    if isinstance(data, Mapping) and "type" not in data and "policy" in data:
        return {**data, "type": "policy"}
    return data


StopConditionSpec = Annotated[
    MaxRoundsSpec
    | TimeoutSpec
    | TokenBudgetSpec
    | ConsecutiveErrorsSpec
    | StopOnSuggestorSpec
    | StopOnToolSpec
    | ContentMatchSpec
    | LoopDetectionSpec
    | CostBudgetSpec
    | InvocationBudgetSpec
    | CustomPolicySpec,
    Field(discriminator="type"),
    BeforeValidator(_tag_custom_policy),
]
"""One stop condition, discriminated on ``type`` (JSON/YAML); see the module docstring."""

SPEC_TYPES: dict[str, type[SpecBase]] = {
    "max_rounds": MaxRoundsSpec,
    "timeout": TimeoutSpec,
    "token_budget": TokenBudgetSpec,
    "consecutive_errors": ConsecutiveErrorsSpec,
    "stop_on_suggestor": StopOnSuggestorSpec,
    "stop_on_tool": StopOnToolSpec,
    "content_match": ContentMatchSpec,
    "loop_detection": LoopDetectionSpec,
    "cost_budget": CostBudgetSpec,
    "invocation_budget": InvocationBudgetSpec,
    "policy": CustomPolicySpec,
}
"""Every kind of :data:`StopConditionSpec` (the ``type`` tag) → its spec model."""
