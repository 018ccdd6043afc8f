"""The budget options of ``converge run`` and ``converge resume``, and the budget
they give.

Both commands, and ``converge fork``, take the same ``--max-*`` options, the fields of
:class:`BudgetFlags` (an option group, :func:`converge.cli.commands.option_groups`),
each a total (what a resumed run used so far included), laid over a budget by
:func:`apply_budget`; ``resume`` also takes ``--add-cycles N``: N cycles more than
the run has done.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

import typer
from pydantic import ValidationError

from converge.cli.render import fail
from engine import Budget

__all__ = [
    "NO_BUDGET_OPTIONS",
    "AddCyclesOption",
    "BudgetFlags",
    "MaxCostOption",
    "MaxCostUsdOption",
    "MaxCyclesOption",
    "MaxFactsOption",
    "MaxInvocationsOption",
    "MaxSecondsOption",
    "MaxTokensOption",
    "apply_budget",
    "resumed_budget",
]

MaxCyclesOption = Annotated[
    int | None, typer.Option("--max-cycles", help="Cycles in total, those done included.")
]
MaxFactsOption = Annotated[
    int | None, typer.Option("--max-facts", help="Facts in total, those kept included.")
]
MaxTokensOption = Annotated[
    int | None, typer.Option("--max-tokens", help="Tokens in total, those used included.")
]
MaxSecondsOption = Annotated[
    float | None,
    typer.Option("--max-seconds", help="Seconds in total, those run so far included."),
]
MaxCostOption = Annotated[
    float | None, typer.Option("--max-cost", help="USD in total, what was spent included.")
]
MaxCostUsdOption = Annotated[
    float | None,
    typer.Option("--max-cost-usd", hidden=True, help="--max-cost, by its former name."),
]
MaxInvocationsOption = Annotated[
    int | None,
    typer.Option("--max-invocations", help="Invocations in total, those made included."),
]

AddCyclesOption = Annotated[
    int | None,
    typer.Option(
        "--add-cycles",
        help="Cycles more than the run has done (instead of the total --max-cycles).",
    ),
]


@dataclass(frozen=True, slots=True)
class BudgetFlags:
    """The ``--max-*`` options of ``run``, ``resume`` and ``fork`` as given (None: not
    given), in the order of their help (an option group:
    :func:`converge.cli.commands.option_groups`); ``max_cost_usd`` is
    ``--max-cost`` by its former name; ``add_cycles`` is ``resume``'s
    ``--add-cycles`` (left out of the others)."""

    max_cycles: MaxCyclesOption = None
    add_cycles: AddCyclesOption = None
    max_facts: MaxFactsOption = None
    max_tokens: MaxTokensOption = None
    max_seconds: MaxSecondsOption = None
    max_cost: MaxCostOption = None
    max_cost_usd: MaxCostUsdOption = None
    max_invocations: MaxInvocationsOption = None

    def changes(self) -> dict[str, Any]:
        """The :class:`engine.Budget` fields the options set (those given only)."""
        given = {
            "max_cycles": self.max_cycles,
            "max_facts": self.max_facts,
            "max_tokens": self.max_tokens,
            "max_seconds": self.max_seconds,
            "max_cost_usd": self.max_cost if self.max_cost is not None else self.max_cost_usd,
            "max_invocations": self.max_invocations,
        }
        return {k: v for k, v in given.items() if v is not None}

    @property
    def cost_flag(self) -> str:
        """The name the cost was given by, for an error naming it."""
        return "--max-cost-usd" if self.max_cost is None else "--max-cost"

    def over(self, budget: Budget) -> Budget:
        """``budget`` with the options laid over it (exits 2 on a bad value)."""
        changes = self.changes()
        return apply_budget(budget, changes, cost_flag=self.cost_flag) if changes else budget


NO_BUDGET_OPTIONS = BudgetFlags()
"""No option given: the default of a command's ``budget`` parameter, whose options
:func:`converge.cli.commands.option_groups` gives the command."""


def apply_budget(
    current: Budget, changes: dict[str, Any], *, cost_flag: str = "--max-cost"
) -> Budget:
    """``current`` with ``changes`` laid over it; exits 2 naming the option of a bad
    value (``bad budget: --max-cycles: Input should be greater than or equal to 0``;
    ``cost_flag`` is the name the cost was given by)."""
    try:
        return Budget.model_validate({**current.model_dump(), **changes})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        flag = cost_flag if where == "max_cost_usd" else "--" + where.replace("_", "-")
        fail(f"bad budget: {flag}: {first['msg']}")


def resumed_budget(
    current: Budget,
    checkpoint: dict[str, Any],
    changes: dict[str, Any],
    add_cycles: int | None = None,
    *,
    cost_flag: str = "--max-cost",
) -> Budget | None:
    """The budget a resume goes on with: ``current`` (the run's, from its
    ``checkpoint``) with the ``--max-*`` ``changes`` and ``--add-cycles`` laid over
    it; None when no option was given (the run keeps its own budget).

    Exits 2 for a total not above what the run already used (``--max-cycles 5``
    after 5 cycles), for ``--add-cycles`` below 1 or given with ``--max-cycles``.
    """
    done = checkpoint.get("cycle")
    cycles_done = done if isinstance(done, int) else 0
    if add_cycles is not None:
        if "max_cycles" in changes:
            fail("give --max-cycles (a total) or --add-cycles (cycles more), not both")
        if add_cycles < 1:
            fail(f"--add-cycles {add_cycles}: give at least 1 cycle more")
    budget = apply_budget(current, changes, cost_flag=cost_flag)
    used = {"max_cycles": cycles_done, "max_facts": len(checkpoint.get("facts", []))}
    for name, spent in used.items():
        limit = changes.get(name)
        if limit and limit <= spent:
            flag = "--" + name.replace("_", "-")
            hint = f"try {flag} {spent + limit}"
            if name == "max_cycles":
                hint += f", or --add-cycles {limit} for {limit} more"
            fail(
                f"{flag} {limit} is not above the {spent} already used: budgets are totals ({hint})"
            )
    if add_cycles is not None:
        return apply_budget(budget, {"max_cycles": cycles_done + add_cycles})
    return budget if changes else None
