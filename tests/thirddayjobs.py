"""Suggestors of the third-day tests (issue 59): two jobs that spend their cycle
budget, one still getting somewhere, one going round."""

from __future__ import annotations

from engine import Context, Proposal, suggestor

TOP = 6
"""``climb`` stops proposing at this number: six cycles from 0 reach it."""


@suggestor(name="climb", dependencies=["n"])
def climb(ctx: Context) -> list[Proposal]:
    """The next number after the last, up to :data:`TOP`: progress in every cycle."""
    last = ctx.get("n")[-1]
    return [Proposal("n", last.content + 1, parents=(last.id,))] if last.content < TOP else []


@suggestor(name="echo", dependencies=["n"])
def echo(ctx: Context) -> list[Proposal]:
    """Every number known again (facts already there: they repeat), and one more."""
    known = [Proposal("n", f.content) for f in ctx.get("n")]
    last = ctx.get("n")[-1]
    return [*known, Proposal("n", last.content + 1, parents=(last.id,))]
