"""Stop conditions: declarative specs (JSON/YAML) and the stop policies behind them.

A job file's ``stop_conditions:`` list holds :data:`StopConditionSpec` entries: a
pydantic union discriminated on ``type`` (awaken's ``StopConditionSpec``, tirea's
``stop_on_tool`` and ``loop_detection``, the budgets guide's cost and invocation
budgets), plus ``{policy: "module:Attr"}`` for a custom :class:`StopPolicy`.

- :func:`policies_from_specs` turns *every* kind into a policy object (the
  budget-like ones too, so they work without lowering);
- :func:`apply_stop_conditions` (used by job files) lowers ``max_rounds``,
  ``timeout`` and ``invocation_budget`` into the :class:`Budget`, where the engine
  enforces them exactly, and returns the other kinds as policies.

Every policy is stateless: it reads the run-scoped :class:`RunStats` the engine
hands it after each cycle that promoted facts, so a fresh run starts from fresh
counters (tirea: stop-policy bookkeeping is reset on the next run). A limit of
``0`` disables its spec (awaken's rule): the spec then does nothing at all.
Unknown kinds and bad fields are ``pydantic.ValidationError`` naming them, never a
silent skip (awaken skips the kinds it does not implement; we implement them all).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    field_validator,
)

from engine.budget import Budget
from engine.errors import ConfigurationError
from engine.policy import Continue, RunStats, StopDecision, StopPolicy
from engine.references import resolve_reference
from engine.stop import (
    ConsecutiveErrorsExceeded,
    CostBudgetExhausted,
    CycleBudgetExhausted,
    Finished,
    InvocationBudgetExhausted,
    LoopDetected,
    PolicyStopped,
    TimeBudgetExhausted,
    TokenBudgetExhausted,
)

__all__ = [
    "SPEC_TYPES",
    "ConsecutiveErrors",
    "ConsecutiveErrorsSpec",
    "ContentMatch",
    "ContentMatchSpec",
    "Continue",
    "CostBudget",
    "CostBudgetSpec",
    "CustomPolicySpec",
    "InvocationBudget",
    "InvocationBudgetSpec",
    "LoopDetection",
    "LoopDetectionSpec",
    "MaxRounds",
    "MaxRoundsSpec",
    "RunStats",
    "SpecBase",
    "StopConditionSpec",
    "StopDecision",
    "StopOnSuggestor",
    "StopOnSuggestorSpec",
    "StopOnToolSpec",
    "StopPolicy",
    "Timeout",
    "TimeoutSpec",
    "TokenBudget",
    "TokenBudgetSpec",
    "apply_stop_conditions",
    "load_stop_conditions",
    "parse_stop_conditions",
    "policies_from_specs",
]


# --- policies ------------------------------------------------------------------
# Plain (non-frozen) dataclasses: the StopPolicy protocol declares a settable ``id``.


@dataclass(slots=True)
class MaxRounds:
    """Stops once ``rounds`` cycles ran → ``CycleBudgetExhausted`` (awaken's MaxRounds).

    Checked after a cycle; lowered into ``Budget.max_cycles`` it is exact instead
    (a run that reaches a fixed point in the next cycle still converges).
    """

    rounds: int
    id: str = "max_rounds"

    def evaluate(self, stats: RunStats) -> StopDecision | None:
        """Stop when ``stats.cycle >= rounds`` (0 disables)."""
        if not self.rounds or stats.cycle < self.rounds:
            return None
        reason = CycleBudgetExhausted(cycles_executed=stats.cycle, limit=self.rounds)
        return StopDecision("max_rounds", str(reason), reason)


@dataclass(slots=True)
class Timeout:
    """Stops once the run took more than ``seconds`` → ``TimeBudgetExhausted``.

    Checked between cycles (it cannot cancel work in flight; lowered into
    ``Budget.max_seconds``, ``arun`` cancels async suggestors at the limit).
    """

    seconds: float
    id: str = "timeout"

    def evaluate(self, stats: RunStats) -> StopDecision | None:
        """Stop when ``stats.elapsed_ms > seconds * 1000`` (0 disables)."""
        if not self.seconds or stats.elapsed_ms <= self.seconds * 1000:
            return None
        reason = TimeBudgetExhausted(duration_ms=stats.elapsed_ms, limit_ms=_ms(self.seconds))
        return StopDecision("timeout", str(reason), reason)


@dataclass(slots=True)
class TokenBudget:
    """Stops once input + output tokens exceed ``max_total`` → ``TokenBudgetExhausted``."""

    max_total: int
    id: str = "token_budget"

    def evaluate(self, stats: RunStats) -> StopDecision | None:
        """Stop when ``stats.total_tokens > max_total`` (awaken: ``total > max``; 0 disables)."""
        used = stats.total_tokens
        if not self.max_total or used <= self.max_total:
            return None
        reason = TokenBudgetExhausted(tokens_consumed=used, limit=self.max_total)
        return StopDecision("token_budget", str(reason), reason)


@dataclass(slots=True)
class ConsecutiveErrors:
    """Stops when one suggestor failed ``max`` times in a row → ``ConsecutiveErrorsExceeded``.

    The engine keeps one streak per suggestor; that suggestor's next success
    resets it. Only meaningful with ``Engine(on_error="continue")``: with
    ``"stop"`` the first failure already ends the run with ``Error``.
    """

    max: int
    id: str = "consecutive_errors"

    def evaluate(self, stats: RunStats) -> StopDecision | None:
        """Stop when ``stats.consecutive_errors >= max`` (awaken's rule; 0 disables)."""
        if not self.max or stats.consecutive_errors < self.max:
            return None
        reason = ConsecutiveErrorsExceeded(
            errors=stats.consecutive_errors, limit=self.max, last_error=stats.last_error or ""
        )
        return StopDecision("consecutive_errors", str(reason), reason)


@dataclass(slots=True)
class StopOnSuggestor:
    """Ends the run with ``Finished`` after suggestor ``name`` ran (tirea's StopOnTool)."""

    name: str
    id: str = "stop_on_suggestor"

    def evaluate(self, stats: RunStats) -> StopDecision | None:
        """Stop when ``name`` is among ``stats.last_suggestors`` (executed last cycle)."""
        if not self.name or self.name not in stats.last_suggestors:
            return None
        reason = Finished(suggestor=self.name, message=f"ran in cycle {stats.cycle}")
        return StopDecision("stop_on_suggestor", str(reason), reason)


@dataclass(slots=True)
class ContentMatch:
    """Stops when a fact promoted in the last cycle matches ``pattern`` → ``PolicyStopped``.

    ``pattern`` is a Python regular expression searched (``re.search``) in each new
    fact's content: strings as they are, any other content as canonical JSON
    (sorted keys, no spaces). ``key`` limits the search to facts of that key.
    The stop is ``PolicyStopped(policy_id, code="content_match", detail)``.
    Raises ``re.error`` for an invalid pattern.
    """

    pattern: str
    key: str | None = None
    id: str = "content_match"
    _regex: re.Pattern[str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._regex = re.compile(self.pattern)

    def evaluate(self, stats: RunStats) -> StopDecision | None:
        """Search every fact of ``stats.last_fact_contents`` (of ``key`` when set)."""
        if not self.pattern:
            return None
        ids: tuple[str, ...] = stats.last_facts
        if len(ids) != len(stats.last_fact_contents):
            ids = ()
        for i, (key, content) in enumerate(stats.last_fact_contents):
            if self.key is not None and key != self.key:
                continue
            text = content if isinstance(content, str) else _canonical_json(content)
            m = self._regex.search(text)
            if m is not None:
                where = f"fact {ids[i]}" if ids else f"a fact of key {key!r}"
                detail = f"{self.pattern!r} matched {m.group(0)!r} in {where}"
                return StopDecision("content_match", detail)
        return None


@dataclass(slots=True)
class LoopDetection:
    """Stops when the last ``2 * window`` invocations repeat → ``LoopDetected``.

    Fires when the tail of ``stats.invocation_history`` (suggestor names, one per
    invocation) is periodic with a period ``p <= window``: ``h[i] == h[i + p]`` for
    every ``i`` of ``h = history[-2 * window:]``. So a 2-cycle (a, b, a, b...) and
    a 3-cycle both fire within a window of 4, while a chain of distinct suggestors,
    or any sequence that is not periodic, never does. ``pattern`` is the repeating
    unit, as it first appears in that tail. Cost: O(window²) per check at worst.
    """

    window: int
    id: str = "loop_detection"

    def evaluate(self, stats: RunStats) -> StopDecision | None:
        """Stop on the shortest period ``p <= window`` of the last ``2 * window`` names."""
        w = self.window
        if not w:
            return None
        history = stats.invocation_history
        n = 2 * w
        if len(history) < n:
            return None
        tail = list(history[-n:])
        for p in range(1, w + 1):
            if all(tail[i] == tail[i + p] for i in range(n - p)):
                reason = LoopDetected(window=w, pattern=tail[:p])
                return StopDecision("loop_detection", str(reason), reason)
        return None


@dataclass(slots=True)
class CostBudget:
    """Stops once the cost reported by suggestors exceeds ``max_usd`` → ``CostBudgetExhausted``."""

    max_usd: float
    id: str = "cost_budget"

    def evaluate(self, stats: RunStats) -> StopDecision | None:
        """Stop when ``stats.cost_usd > max_usd`` (0 disables)."""
        if not self.max_usd or stats.cost_usd <= self.max_usd:
            return None
        reason = CostBudgetExhausted(cost_usd=stats.cost_usd, limit_usd=self.max_usd)
        return StopDecision("cost_budget", str(reason), reason)


@dataclass(slots=True)
class InvocationBudget:
    """Stops once invocations reach ``max_total`` (or a suggestor its ``per_suggestor``
    limit) → ``InvocationBudgetExhausted``.

    A policy runs after a cycle and cannot refuse an invocation, so it stops the
    run as soon as a count *reaches* its limit; lowered into the budget
    (``max_invocations``/``per_suggestor``) the engine refuses the invocation
    beyond the limit instead, exactly.
    """

    max_total: int = 0
    per_suggestor: dict[str, int] = field(default_factory=dict)
    id: str = "invocation_budget"

    def evaluate(self, stats: RunStats) -> StopDecision | None:
        """Total first, then each limited suggestor in the order given (0 disables)."""
        reason: InvocationBudgetExhausted | None = None
        if self.max_total and stats.invocations >= self.max_total:
            reason = InvocationBudgetExhausted(invocations=stats.invocations, limit=self.max_total)
        else:
            for name, limit in self.per_suggestor.items():
                used = stats.invocations_by_suggestor.get(name, 0)
                if limit and used >= limit:
                    reason = InvocationBudgetExhausted(
                        invocations=used, limit=limit, suggestor=name
                    )
                    break
        if reason is None:
            return None
        return StopDecision("invocation_budget", str(reason), reason)


# --- specs ---------------------------------------------------------------------


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
    yields = CycleBudgetExhausted
    origin = "awaken, tirea"

    def to_policy(self) -> StopPolicy:
        """A :class:`MaxRounds` policy."""
        return MaxRounds(self.rounds)


class TimeoutSpec(SpecBase):
    """``{type: timeout, seconds: S}``: wall-clock limit (lowers to ``max_seconds``)."""

    type: Literal["timeout"]
    seconds: float = Field(ge=0, description="seconds of wall-clock time, pauses excluded")
    yields = TimeBudgetExhausted
    origin = "awaken, tirea"

    def to_policy(self) -> StopPolicy:
        """A :class:`Timeout` policy."""
        return Timeout(self.seconds)


class TokenBudgetSpec(SpecBase):
    """``{type: token_budget, max_total: N}``: input + output tokens."""

    type: Literal["token_budget"]
    max_total: int = Field(ge=0, description="tokens, input + output; 0 disables")
    yields = TokenBudgetExhausted
    origin = "awaken"

    def to_policy(self) -> StopPolicy:
        """A :class:`TokenBudget` policy."""
        return TokenBudget(self.max_total)


class ConsecutiveErrorsSpec(SpecBase):
    """``{type: consecutive_errors, max: N}``: one suggestor failing N times in a row."""

    type: Literal["consecutive_errors"]
    max: int = Field(ge=0, description="failed executions in a row; 0 disables")
    yields = ConsecutiveErrorsExceeded
    origin = "awaken"

    def to_policy(self) -> StopPolicy:
        """A :class:`ConsecutiveErrors` policy."""
        return ConsecutiveErrors(self.max)


class StopOnSuggestorSpec(SpecBase):
    """``{type: stop_on_suggestor, name: S}``: finish after suggestor S ran."""

    type: Literal["stop_on_suggestor"]
    name: str = Field(min_length=1, description="a registered suggestor name")
    yields = Finished
    origin = "tirea"

    def to_policy(self) -> StopPolicy:
        """A :class:`StopOnSuggestor` policy."""
        return StopOnSuggestor(self.name)


class StopOnToolSpec(SpecBase):
    """``{type: stop_on_tool, tool_name: S}``: tirea's spelling of ``stop_on_suggestor``."""

    type: Literal["stop_on_tool"]
    tool_name: str = Field(min_length=1, description="a registered suggestor name")
    yields = Finished
    origin = "tirea"

    def to_policy(self) -> StopPolicy:
        """A :class:`StopOnSuggestor` policy (the id says ``stop_on_tool``)."""
        return StopOnSuggestor(self.tool_name, id="stop_on_tool")


class ContentMatchSpec(SpecBase):
    """``{type: content_match, pattern: R, key: K}``: a regex over new facts' content."""

    type: Literal["content_match"]
    pattern: str = Field(min_length=1, description="Python regex, searched (re.search)")
    key: str | None = Field(default=None, description="only facts of this key; None = all")
    yields = PolicyStopped
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
        return ContentMatch(self.pattern, self.key)


class LoopDetectionSpec(SpecBase):
    """``{type: loop_detection, window: W}``: the last 2 * W invocations repeat."""

    type: Literal["loop_detection"]
    window: int = Field(ge=0, description="invocations; longest period caught; 0 disables")
    yields = LoopDetected
    origin = "tirea, budgets guide"

    def to_policy(self) -> StopPolicy:
        """A :class:`LoopDetection` policy."""
        return LoopDetection(self.window)


class CostBudgetSpec(SpecBase):
    """``{type: cost_budget, max_usd: X}``: the cost suggestors report, in USD."""

    type: Literal["cost_budget"]
    max_usd: float = Field(ge=0, description="USD; 0 disables")
    yields = CostBudgetExhausted
    origin = "budgets guide"

    def to_policy(self) -> StopPolicy:
        """A :class:`CostBudget` policy."""
        return CostBudget(self.max_usd)


class InvocationBudgetSpec(SpecBase):
    """``{type: invocation_budget, max_total: N, per_suggestor: {name: N}}``.

    Lowers to ``Budget.max_invocations`` / ``Budget.per_suggestor``.
    """

    type: Literal["invocation_budget"]
    max_total: int = Field(default=0, ge=0, description="invocations in total; 0 disables")
    per_suggestor: dict[str, int] = Field(
        default_factory=dict, description="invocations per suggestor name; 0 disables one"
    )
    yields = InvocationBudgetExhausted
    origin = "budgets guide"

    @field_validator("per_suggestor")
    @classmethod
    def _non_negative(cls, value: dict[str, int]) -> dict[str, int]:
        for name, limit in value.items():
            if limit < 0:
                raise ValueError(f"per_suggestor[{name!r}] must be >= 0, got {limit}")
        return value

    def to_policy(self) -> StopPolicy:
        """An :class:`InvocationBudget` policy."""
        return InvocationBudget(self.max_total, dict(self.per_suggestor))


class CustomPolicySpec(SpecBase):
    """``{policy: "module:Attr"}``: a custom :class:`StopPolicy` (``type: policy`` implied).

    The reference is resolved with ``engine.references.resolve_reference`` (a class or a
    factory is called with no arguments). Its stops are ``PolicyStopped(policy_id,
    code, detail)`` unless its decision carries a ``reason``.
    """

    type: Literal["policy"] = "policy"
    policy: str = Field(pattern=r"^[\w.]+:[\w.]+$", description="'module:Attr' reference")
    yields = PolicyStopped
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

_LIST_ADAPTER: TypeAdapter[list[StopConditionSpec]] = TypeAdapter(list[StopConditionSpec])

_LOWERED = (MaxRoundsSpec, TimeoutSpec, InvocationBudgetSpec)


# --- entry points --------------------------------------------------------------


def parse_stop_conditions(
    specs: Iterable[Mapping[str, Any] | SpecBase],
) -> list[StopConditionSpec]:
    """Validate a list of specs (dicts as in JSON/YAML, or spec models).

    Raises ``pydantic.ValidationError`` naming the entry, the unknown ``type`` or
    the bad field (its location is ``(index, type, field)``).
    """
    items = [s.model_dump() if isinstance(s, SpecBase) else s for s in specs]
    return _LIST_ADAPTER.validate_python(items)


def load_stop_conditions(text: str) -> list[StopConditionSpec]:
    """Parse YAML (or JSON) text: a list of specs, or a mapping with ``stop_conditions``.

    Raises ``ValueError`` when the text holds neither, ``yaml.YAMLError`` for bad
    YAML and ``pydantic.ValidationError`` for bad specs.
    """
    import yaml

    data = yaml.safe_load(text)
    if isinstance(data, Mapping) and "stop_conditions" in data:
        data = data["stop_conditions"]
    if data is None:
        return []
    if not isinstance(data, list):
        raise ValueError("expected a list of stop conditions (or a 'stop_conditions:' key)")
    return parse_stop_conditions(data)


def policies_from_specs(specs: Iterable[Mapping[str, Any] | SpecBase]) -> list[StopPolicy]:
    """One policy per spec, in order; every kind is implemented (awaken's function).

    Built-in policies of the same kind get distinct ids (``content_match``,
    ``content_match#2``...). Raises ``pydantic.ValidationError`` for an unknown
    kind or a bad field and ``ConfigurationError`` for a custom reference that
    cannot be imported or is not a :class:`StopPolicy`.
    """
    policies: list[StopPolicy] = []
    seen: dict[str, int] = {}
    for i, spec in enumerate(parse_stop_conditions(specs)):
        try:
            policy = spec.to_policy()
        except ConfigurationError as exc:
            raise ConfigurationError(f"stop condition {i}: {exc}") from exc
        if not isinstance(spec, CustomPolicySpec):
            n = seen.get(policy.id, 0) + 1
            seen[policy.id] = n
            if n > 1:
                policy.id = f"{policy.id}#{n}"
        policies.append(policy)
    return policies


def apply_stop_conditions(
    budget: Budget, specs: Iterable[Mapping[str, Any] | SpecBase]
) -> tuple[Budget, list[StopPolicy]]:
    """Lower ``max_rounds``, ``timeout`` and ``invocation_budget`` into ``budget``;
    return the new budget and the other specs as policies.

    A lowered spec wins over the budget's own field (tirea: an explicit
    ``max_rounds`` replaces the agent's ``max_rounds``): ``max_rounds`` sets
    ``max_cycles``, ``timeout`` sets ``max_seconds``, ``invocation_budget`` sets
    ``max_invocations`` and its ``per_suggestor`` entries. A disabled spec (0)
    changes nothing. Raises ``pydantic.ValidationError`` for bad specs and
    ``ConfigurationError`` when a lowered kind is given twice or a custom
    reference is bad.
    """
    parsed = parse_stop_conditions(specs)
    updates: dict[str, Any] = {}
    per_suggestor = dict(budget.per_suggestor)
    seen: set[str] = set()
    others: list[StopConditionSpec] = []
    for spec in parsed:
        if not isinstance(spec, _LOWERED):
            others.append(spec)
            continue
        if spec.type in seen:
            raise ConfigurationError(f"{spec.type} is given twice; keep one")
        seen.add(spec.type)
        if isinstance(spec, MaxRoundsSpec):
            if spec.rounds:
                updates["max_cycles"] = spec.rounds
        elif isinstance(spec, TimeoutSpec):
            if spec.seconds:
                updates["max_seconds"] = spec.seconds
        else:
            if spec.max_total:
                updates["max_invocations"] = spec.max_total
            per_suggestor.update({k: v for k, v in spec.per_suggestor.items() if v})
    if per_suggestor != budget.per_suggestor:
        updates["per_suggestor"] = per_suggestor
    new_budget = budget.model_copy(update=updates) if updates else budget
    return new_budget, policies_from_specs(others)


# --- helpers -------------------------------------------------------------------


def _canonical_json(content: Any) -> str:
    return json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _ms(seconds: float) -> int:
    return round(seconds * 1000)
