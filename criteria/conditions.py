"""Ready-made success criteria: conditions over the context a user reaches for."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.context import Context
from engine.criterion import Blocked, CriterionResult, Met, Unmet
from engine.facts import Fact


@dataclass(frozen=True)
class KeyPresent:
    """Met when ``key`` holds at least ``at_least`` facts (default 1)."""

    key: str
    at_least: int = 1
    id: str = ""
    required: bool = True

    def __post_init__(self) -> None:
        if self.at_least < 1:
            raise ValueError(f"at_least must be >= 1, got {self.at_least}")
        if not self.id:
            object.__setattr__(self, "id", f"{self.key}>={self.at_least}")

    def evaluate(self, ctx: Context) -> CriterionResult:
        """Met, or Unmet with the count found."""
        n = ctx.count(self.key)
        if n >= self.at_least:
            return Met()
        return Unmet(f"{n} fact(s) on {self.key!r}, need {self.at_least}")


@dataclass(frozen=True)
class AllFactsSatisfy:
    """Met when every fact on ``key`` satisfies ``predicate`` (and one exists, if ``non_empty``)."""

    key: str
    predicate: Callable[[Fact], bool]
    id: str = ""
    required: bool = True
    non_empty: bool = True

    def __post_init__(self) -> None:
        if not self.id:
            object.__setattr__(self, "id", f"all:{self.key}")

    def evaluate(self, ctx: Context) -> CriterionResult:
        """Met, or Unmet naming the first fact that fails."""
        facts = ctx.get(self.key)
        if self.non_empty and not facts:
            return Unmet(f"no fact on {self.key!r}")
        for fact in facts:
            if not self.predicate(fact):
                return Unmet(f"fact {fact.id} does not satisfy the predicate")
        return Met()


@dataclass(frozen=True)
class CallableCriterion:
    """Any callable over the context, as a criterion.

    The callable returns a bool (True = met), a reason string (unmet), or a
    :data:`CriterionResult` (``Met()``, ``Unmet(reason)``, ``Blocked(reason, ref)``).
    """

    fn: Callable[[Context], Any]
    id: str
    required: bool = True

    def evaluate(self, ctx: Context) -> CriterionResult:
        """Calls the function and normalises its answer."""
        out = self.fn(ctx)
        if isinstance(out, Met | Unmet | Blocked):
            return out
        if out is True:
            return Met()
        if out is False or out is None:
            return Unmet(f"{self.id} is not satisfied")
        if isinstance(out, str):
            return Unmet(out)
        raise TypeError(f"criterion {self.id} returned {type(out).__name__}")


def criterion(
    *, id: str | None = None, required: bool = True
) -> Callable[[Callable[[Context], Any]], CallableCriterion]:
    """Decorate a function of the context into a criterion (id = function name)."""

    def wrap(fn: Callable[[Context], Any]) -> CallableCriterion:
        return CallableCriterion(fn, id or fn.__name__, required)

    return wrap
