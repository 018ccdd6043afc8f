"""Budgets: the bounds of a run, and how much of each was used."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator


def check_per_suggestor(value: dict[str, int]) -> dict[str, int]:
    """A ``per_suggestor`` mapping (suggestor name -> invocations, 0 disables one) as
    given; ``ValueError`` naming the first negative limit (a pydantic validator)."""
    for name, limit in value.items():
        if limit < 0:
            raise ValueError(f"per_suggestor[{name!r}] must be >= 0, got {limit}")
    return value


class Budget(BaseModel):
    """The limits of one run. ``None`` or ``0`` means unlimited (as awaken: 0 = disabled).

    - ``max_cycles`` (cycles, default 100) and ``max_invocations`` (suggestor
      executions, in total; ``per_suggestor`` by name) are never exceeded: the run
      stops instead of starting one more.
    - ``max_facts`` (facts, default 10 000), ``max_tokens`` (input + output tokens),
      ``max_seconds`` (seconds of wall-clock time, pauses excluded) and
      ``max_cost_usd`` (USD) stop the run once used *exceeds* the limit.

    Defaults are converge-core's. Raises ``pydantic.ValidationError`` for negatives,
    NaN and infinities (no limit is written ``null`` or ``0``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    max_cycles: int | None = Field(
        default=100, ge=0, description="Cycles (never exceeded); null or 0: unlimited."
    )
    max_facts: int | None = Field(
        default=10_000,
        ge=0,
        description="Facts in the context; the run stops once it holds more.",
    )
    max_tokens: int | None = Field(
        default=None, ge=0, description="Input + output tokens of LLM suggestors."
    )
    max_seconds: float | None = Field(
        default=None,
        ge=0,
        description="Seconds of wall-clock time, pauses at gates excluded.",
    )
    max_cost_usd: float | None = Field(
        default=None, ge=0, description="USD spent by LLM suggestors."
    )
    max_invocations: int | None = Field(
        default=None, ge=0, description="Suggestor executions in total (never exceeded)."
    )
    per_suggestor: dict[str, int] = Field(
        default_factory=dict, description="Executions per suggestor, by name (never exceeded)."
    )
    _non_negative = field_validator("per_suggestor")(check_per_suggestor)

    @staticmethod
    def unlimited() -> Budget:
        """A budget with every dimension disabled."""
        return Budget(max_cycles=None, max_facts=None)

    def limit(self, dimension: str) -> float | None:
        """The active limit of a dimension (``None`` when disabled)."""
        value: Any = getattr(self, dimension)
        return value if value else None


class DimensionStatus(BaseModel):
    """Use of one budget dimension: ``used``, ``limit`` (None = unlimited), ``percent``."""

    model_config = ConfigDict(frozen=True)

    used: float
    limit: float | None
    percent: float | None


class BudgetStatus(BaseModel):
    """Use of every dimension (the budget guide's ``getBudgetStatus``).

    Dimensions: ``cycles``, ``facts``, ``tokens``, ``seconds``, ``cost_usd``,
    ``invocations``, plus ``suggestor:<name>`` per limited suggestor.
    ``percent`` is the maximum percent over the limited dimensions (0 if none).
    """

    model_config = ConfigDict(frozen=True)

    dimensions: dict[str, DimensionStatus]
    percent: float

    @staticmethod
    def compute(
        budget: Budget, used: dict[str, float], per_suggestor: Mapping[str, int]
    ) -> BudgetStatus:
        """Build the status from the amounts used, keyed like ``dimensions``."""
        limits: dict[str, float | None] = {
            "cycles": budget.max_cycles or None,
            "facts": budget.max_facts or None,
            "tokens": budget.max_tokens or None,
            "seconds": budget.max_seconds or None,
            "cost_usd": budget.max_cost_usd or None,
            "invocations": budget.max_invocations or None,
        }
        amounts = dict(used)
        for name, lim_int in budget.per_suggestor.items():
            limits[f"suggestor:{name}"] = lim_int or None
            amounts[f"suggestor:{name}"] = per_suggestor.get(name, 0)
        dims: dict[str, dict[str, float | None]] = {}
        percents: list[float] = []
        for name, lim in limits.items():
            amount = amounts.get(name, 0)
            percent = None if not lim else round(100.0 * amount / lim, 2)
            dims[name] = {"used": amount, "limit": lim, "percent": percent}
            if percent is not None:
                percents.append(percent)
        # one validation of the whole tree: a run pays it at each stop
        return BudgetStatus.model_validate(
            {"dimensions": dims, "percent": max(percents, default=0.0)}
        )

    def summary(self) -> str:
        """One line per limited dimension: ``cycles 3/20 (15.0%)``."""
        parts = []
        for name, d in self.dimensions.items():
            if d.limit is not None:
                parts.append(f"{name} {_fmt(d.used)}/{_fmt(d.limit)} ({d.percent:.1f}%)")
        return ", ".join(parts) if parts else "no limits"


def _fmt(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.3f}"


@dataclass(frozen=True, slots=True)
class RemainingBudget:
    """What is left of a run's budgets while a suggestor executes
    (``Context.remaining_budget()``); ``None`` in a field means unlimited.

    - ``tokens`` (input + output tokens) and ``cost_usd`` (USD): what may still be
      used without *exceeding* the limit (never negative).
    - ``invocations``: executions and tool calls the run may still start, counted
      up to the end of the previous cycle (the current cycle's own executions,
      this one included, are not subtracted yet); ``per_suggestor``: the same per
      limited name (a suggestor, or an agent's tool ``NAME.TOOL``).
    - ``seconds``: wall-clock seconds left before the time budget.
    - ``budget``: the run's :class:`Budget` itself (its limits), when known.

    A suggestor that spends inside one call (an LLM agent) caps the call with it.
    """

    tokens: int | None = None
    cost_usd: float | None = None
    invocations: int | None = None
    seconds: float | None = None
    per_suggestor: Mapping[str, int] = field(default_factory=dict)
    budget: Budget | None = None

    def for_name(self, name: str) -> int | None:
        """Invocations left for ``name`` (``None`` when it has no limit)."""
        return self.per_suggestor.get(name)
