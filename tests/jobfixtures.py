"""Objects referenced by the job files of the tests."""

from __future__ import annotations

from criteria import Unmet, criterion, invariant
from engine import Context, FunctionSuggestor, Proposal, Violation, suggestor
from engine.stop import InvariantClass


@suggestor(name="tick")
def tick(ctx: Context) -> list[Proposal]:
    """Proposes a new number every cycle: never converges."""
    return [Proposal("n", ctx.count("n"))]


@criterion(id="never")
def never(ctx: Context) -> Unmet:
    """A criterion that is never met."""
    return Unmet("never")


@invariant(name="small", invariant_class=InvariantClass.STRUCTURAL)
def small(ctx: Context) -> str | None:
    """No more than 1000 facts."""
    return None if len(ctx) <= 1000 else "too many facts"


def make_pair() -> list[FunctionSuggestor]:
    """A factory returning two suggestors."""
    return [
        FunctionSuggestor(lambda ctx: None, "pair_a"),
        FunctionSuggestor(lambda ctx: None, "pair_b"),
    ]


class Small:
    """An invariant class instantiated by reference."""

    name = "small_class"
    invariant_class = InvariantClass.STRUCTURAL

    def check(self, ctx: Context) -> Violation | None:
        return None


@suggestor(name="signal_tick")
def signal_tick(ctx: Context) -> list[Proposal]:
    """Never converges; says on stderr when cycle 3 started (for the signal tests)."""
    if ctx.cycle == 3:
        import sys

        print("cycle 3", file=sys.stderr, flush=True)
    return [Proposal("n", ctx.count("n"))]
