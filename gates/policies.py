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

The policies are in :mod:`gates.stop_policies`, the specs in :mod:`gates.stop_specs`;
this module turns specs into policies and re-exports both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ConfigDict, TypeAdapter

from engine.budget import Budget
from engine.errors import ConfigurationError
from engine.policy import Continue, RunStats, StopDecision, StopPolicy
from gates.stop_policies import (
    ConsecutiveErrors,
    ContentMatch,
    CostBudget,
    InvocationBudget,
    LoopDetection,
    MaxRounds,
    StopOnSuggestor,
    Timeout,
    TokenBudget,
)
from gates.stop_specs import (
    SPEC_TYPES,
    ConsecutiveErrorsSpec,
    ContentMatchSpec,
    CostBudgetSpec,
    CustomPolicySpec,
    InvocationBudgetSpec,
    LoopDetectionSpec,
    MaxRoundsSpec,
    SpecBase,
    StopConditionSpec,
    StopOnSuggestorSpec,
    StopOnToolSpec,
    TimeoutSpec,
    TokenBudgetSpec,
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


_LIST_ADAPTER: TypeAdapter[list[StopConditionSpec]] = TypeAdapter(
    list[StopConditionSpec], config=ConfigDict(defer_build=True)
)

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
