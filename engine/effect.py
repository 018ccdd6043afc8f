"""Effects: what one execution of a suggestor produced, and what it cost."""

from __future__ import annotations

from dataclasses import dataclass, field
from math import isfinite
from typing import TYPE_CHECKING, Any

from engine.facts import Proposal

if TYPE_CHECKING:  # a signal's type only: a store's reader builds no stop model
    from engine.stop import StopReason


@dataclass(frozen=True, slots=True)
class Usage:
    """Resources used: ``input_tokens`` and ``output_tokens`` (tokens), ``cost_usd`` (USD)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cost_usd + other.cost_usd,
        )


NO_USAGE = Usage()


def usage_problem(usage: object) -> str | None:
    """What is wrong with ``usage`` as a :class:`Usage` (non-negative integer token
    counts, a finite non-negative USD cost), or None."""
    if type(usage) is not Usage:
        return f"usage of type {type(usage).__name__}, expected a Usage"
    if usage is not NO_USAGE:
        i, o, c = usage.input_tokens, usage.output_tokens, usage.cost_usd
        if type(i) is not int or type(o) is not int or i < 0 or o < 0:
            return f"usage with bad token counts {i!r}, {o!r} (non-negative integers)"
        if type(c) not in (int, float) or not isfinite(c) or c < 0:
            return f"usage with a bad cost {c!r} (a finite, non-negative USD amount)"
    return None


@dataclass(frozen=True, slots=True)
class Effect:
    """The result of one execution: ``proposals``, ``usage``, and an optional ``refusal``.

    A refusal (``Effect.refuse(reason)``) stops the run with ``AgentRefused``, as
    converge-core's suggestors decline to produce output.

    Three optional fields let an execution that runs its own loop inside (an LLM
    agent calling tools) report what happened there:

    - ``tool_calls``: the tools it called, in order; each counts as one invocation
      named ``NAME.TOOL`` (``NAME`` the suggestor's), so the invocation budget,
      ``per_suggestor`` limits, ``stop_on_tool`` and loop detection see them.
    - ``signal``: a stop reason it detected inside (a budget it hit mid-call, a
      configuration error): the run stops with it after this cycle's merge, and
      this effect's proposals are merged first.
    - ``audit``: JSON-serialisable details added to its ``suggestor_executed``
      audit event (e.g. the messages an agent exchanged before a limit hit).
    """

    proposals: list[Proposal] = field(default_factory=list)
    usage: Usage = NO_USAGE
    refusal: str | None = None
    tool_calls: tuple[str, ...] = ()
    signal: StopReason | None = None
    audit: dict[str, Any] | None = None

    @staticmethod
    def none() -> Effect:
        """An effect that proposes nothing."""
        return Effect()

    @staticmethod
    def refuse(reason: str, usage: Usage = NO_USAGE) -> Effect:
        """An explicit refusal to produce output, with its reason."""
        return Effect(refusal=reason, usage=usage)

    @staticmethod
    def of(*proposals: Proposal, usage: Usage = NO_USAGE) -> Effect:
        """An effect proposing ``proposals`` in order."""
        return Effect(list(proposals), usage)
