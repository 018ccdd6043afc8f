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


# --- reports and papercuts (tests/test_reports.py, tests/test_cli_papercuts.py) ---------
LONG_NAME = "a-package-whose-name-is-far-longer-than-sixty-characters-so-a-cut-would-show"


@suggestor(name="catalogue")
def catalogue(ctx: Context) -> list[Proposal]:
    """Three ``item`` facts with a long name, a license id and a path; once."""
    if ctx.has("item"):
        return []
    return [
        Proposal("item", {"name": LONG_NAME, "spdx": "MIT", "path": ["app", "lib", LONG_NAME]}),
        Proposal("item", {"name": "lib", "spdx": "LGPL-3.0-or-later", "path": ["app", "lib"]}),
        Proposal("item", {"name": "pipe|name", "spdx": "MIT", "path": ["app"]}),
        Proposal("other", "not in any report"),
    ]


@criterion(id="three_n")
def three_n(ctx: Context) -> Unmet | bool:
    """Met at three ``n`` facts; its reason counts them."""
    return True if ctx.count("n") >= 3 else Unmet(f"{ctx.count('n')} of 3 n facts")


@invariant(name="at_most_one_n", invariant_class=InvariantClass.STRUCTURAL)
def at_most_one_n(ctx: Context) -> str | None:
    """Violated once there are two ``n`` facts."""
    return "two n facts" if ctx.count("n") >= 2 else None


@suggestor(name="boom")
def boom(ctx: Context) -> list[Proposal]:
    """Always raises."""
    raise ValueError("boom: the suggestor's own bug")


NOT_A_CRITERION = 42
"""Referenced under ``criteria:`` or ``invariants:`` by the negative tests."""
