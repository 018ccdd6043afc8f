"""Ready-made invariants: rules over the context that must never break."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.context import Context
from engine.invariant import Violation
from engine.stop import InvariantClass


@dataclass(frozen=True)
class CallableInvariant:
    """Any callable over the context, as an invariant of ``invariant_class``.

    The callable returns ``None``/``True`` (holds), ``False`` or a reason string
    (violated), or a :class:`Violation`.
    """

    fn: Callable[[Context], Any]
    name: str
    invariant_class: InvariantClass = InvariantClass.SEMANTIC

    def check(self, ctx: Context) -> Violation | None:
        """Calls the function and normalises its answer."""
        out = self.fn(ctx)
        if out is None or out is True:
            return None
        if isinstance(out, Violation):
            return out
        if out is False:
            return Violation(f"{self.name} does not hold")
        if isinstance(out, str):
            return Violation(out)
        raise TypeError(f"invariant {self.name} returned {type(out).__name__}")


def invariant(
    *, name: str | None = None, invariant_class: InvariantClass | str = InvariantClass.SEMANTIC
) -> Callable[[Callable[[Context], Any]], CallableInvariant]:
    """Decorate a function of the context into an invariant (name = function name)."""

    def wrap(fn: Callable[[Context], Any]) -> CallableInvariant:
        return CallableInvariant(fn, name or fn.__name__, InvariantClass(invariant_class))

    return wrap


@dataclass(frozen=True)
class MaxFactsPerKey:
    """Structural: no key holds more than ``limit`` facts."""

    limit: int
    name: str = "max_facts_per_key"
    invariant_class: InvariantClass = InvariantClass.STRUCTURAL

    def check(self, ctx: Context) -> Violation | None:
        """Names the first key over the limit."""
        for key in ctx.keys():  # noqa: SIM118 - Context is not a dict
            if ctx.count(key) > self.limit:
                return Violation(f"{key!r} holds {ctx.count(key)} facts > {self.limit}")
        return None
