"""A job that never reaches a fixed point: ``ping`` and ``pong`` answer each other forever.

``ping`` reads the last ``pong`` number and proposes the next one on ``ping``;
``pong`` does the same the other way round. Every cycle adds a new fact, so only a
budget (``max_cycles``, → ``CycleBudgetExhausted``, exit 3) or a stop condition
(``loop_detection``, → ``LoopDetected``, exit 6) ends the run.
"""

from __future__ import annotations

from engine import Context, Proposal, suggestor


def _last(ctx: Context, key: str) -> int:
    facts = ctx.get(key)
    return int(facts[-1].content) if facts else 0


@suggestor(name="ping", dependencies=["pong"])
def ping(ctx: Context) -> list[Proposal]:
    """Answers the last ``pong`` with the next number, on ``ping``."""
    last = ctx.get("pong")[-1]
    return [Proposal("ping", _last(ctx, "pong") + 1, parents=(last.id,))]


@suggestor(name="pong", dependencies=["ping"])
def pong(ctx: Context) -> list[Proposal]:
    """Answers the last ``ping`` with the next number, on ``pong``."""
    last = ctx.get("ping")[-1]
    return [Proposal("pong", _last(ctx, "ping") + 1, parents=(last.id,))]


__all__ = ["ping", "pong"]
