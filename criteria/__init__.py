"""Success criteria and invariants: conditions over the context.

The protocols come from ``engine`` (re-exported here); the rest are ready-made
implementations.
"""

from criteria.conditions import AllFactsSatisfy, CallableCriterion, KeyPresent, criterion
from criteria.rules import CallableInvariant, MaxFactsPerKey, invariant
from engine.criterion import Blocked, Criterion, CriterionReport, CriterionResult, Met, Unmet
from engine.invariant import Invariant, Violation
from engine.stop import InvariantClass

__all__ = [
    "AllFactsSatisfy",
    "Blocked",
    "CallableCriterion",
    "CallableInvariant",
    "Criterion",
    "CriterionReport",
    "CriterionResult",
    "Invariant",
    "InvariantClass",
    "KeyPresent",
    "MaxFactsPerKey",
    "Met",
    "Unmet",
    "Violation",
    "criterion",
    "invariant",
]
