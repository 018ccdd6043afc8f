"""Success criteria: conditions over the context that say "the job is done".

The protocol and its outcomes live here so the engine can evaluate criteria;
``criteria`` re-exports them with ready-made implementations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from engine.context import Context


@dataclass(frozen=True, slots=True)
class Met:
    """The criterion holds."""


@dataclass(frozen=True, slots=True)
class Unmet:
    """The criterion does not hold yet; ``reason`` says why."""

    reason: str


@dataclass(frozen=True, slots=True)
class Blocked:
    """Only a human can make it hold (converge-core's blocked criterion).

    ``approval_ref`` points at the approval or workflow item a person must act on.
    """

    reason: str
    approval_ref: str | None = None


CriterionResult = Met | Unmet | Blocked


@runtime_checkable
class Criterion(Protocol):
    """A success condition. ``required`` criteria must all be met for ``CriteriaMet``."""

    id: str
    required: bool

    def evaluate(self, ctx: Context) -> CriterionResult: ...


@dataclass(frozen=True, slots=True)
class CriterionReport:
    """The outcome of one criterion at the end of a run."""

    id: str
    required: bool
    outcome: str  # "met" | "unmet" | "blocked"
    reason: str | None = None
    approval_ref: str | None = None

    @staticmethod
    def of(criterion: Criterion, result: CriterionResult) -> CriterionReport:
        """Summarise one evaluation."""
        if isinstance(result, Met):
            return CriterionReport(criterion.id, criterion.required, "met")
        if isinstance(result, Blocked):
            return CriterionReport(
                criterion.id, criterion.required, "blocked", result.reason, result.approval_ref
            )
        return CriterionReport(criterion.id, criterion.required, "unmet", result.reason)
