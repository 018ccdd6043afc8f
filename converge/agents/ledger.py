"""What agent runs spend while a cycle is in flight, and what they may still call.

The engine adds a cycle's usage to the run only when it collects the cycle, so
agents running concurrently share a :class:`CycleSpend` to see each other's
spend. Inside one agent run, a :class:`CallLedger` (a pydantic-ai capability)
reports to it, stops before a model request once the cycle's agents together are
past what was left of the budget, and counts the tools the agent calls: each is an
invocation ``NAME.TOOL``, refused with :class:`ToolBudgetHit` past its limit.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import UsageLimitExceeded

from converge.agents.pricing import Price, cost_usd
from engine import Context, InvocationBudgetExhausted
from engine.errors import ToolBudgetHit

__all__ = ["CallLedger", "CycleSpend", "ToolBudgetHit", "cycle_spend"]


@dataclass
class CycleSpend:
    """What the agent runs of one cycle of one run spent so far: the engine adds a
    cycle's usage to the run only when it collects the cycle, so agents running
    concurrently share this to see each other's spend (tokens; USD)."""

    in_flight: int = 0
    tokens: int = 0
    cost_usd: float = 0.0


_SPEND: dict[tuple[int, int], CycleSpend] = {}


@contextmanager
def cycle_spend(ctx: Context) -> Iterator[CycleSpend]:
    """The shared spend of ``ctx``'s run in its current cycle, while an execution
    is in flight (entered by each agent execution; dropped when none is left)."""
    key = (id(ctx), ctx.cycle)
    spend = _SPEND.get(key)
    if spend is None:
        spend = _SPEND[key] = CycleSpend()
    spend.in_flight += 1
    try:
        yield spend
    finally:
        spend.in_flight -= 1
        if spend.in_flight == 0:
            _SPEND.pop(key, None)


def _usage_cost(usage: Any, price: Price | None) -> float:
    if price is not None:
        return float(cost_usd(usage.input_tokens, usage.output_tokens, price))
    return float(usage.cost) if usage.cost is not None else 0.0


class CallLedger(AbstractCapability[Any]):
    """Inside one agent run: reports its spend to the cycle's :class:`CycleSpend`
    and stops before a model request once the run's agents together are past
    what was left of the token or cost budget; records the function tools it runs
    and refuses one past its invocation limit (``per_suggestor["NAME.TOOL"]`` or
    what is left of ``max_invocations``)."""

    def __init__(
        self,
        name: str,
        per_tool_left: dict[str, int],
        total_left: int | None,
        total_used: int,
        shared: CycleSpend,
        caps: tuple[int | None, float | None],
        price: Price | None,
    ) -> None:
        self.name = name
        self.per_tool_left = per_tool_left
        self.total_left = total_left
        self.total_used = total_used
        self.calls: list[str] = []
        self.shared = shared
        self.tokens_cap, self.cost_cap = caps
        self.price = price
        self.reported = (0, 0.0)

    def report(self, tokens: int, cost_usd: float) -> None:
        """Bring the shared spend up to this run's ``tokens`` and ``cost_usd`` so far."""
        before_tokens, before_cost = self.reported
        self.shared.tokens += tokens - before_tokens
        self.shared.cost_usd += cost_usd - before_cost
        self.reported = (tokens, cost_usd)

    async def before_model_request(self, ctx: Any, request_context: Any) -> Any:
        """Report the spend so far; raise ``UsageLimitExceeded`` once the cycle's
        agents together are past the token or cost cap."""
        usage = ctx.usage
        self.report(usage.input_tokens + usage.output_tokens, _usage_cost(usage, self.price))
        if self.cost_cap is not None and self.shared.cost_usd > self.cost_cap:
            raise UsageLimitExceeded(
                f"The agents of this cycle spent past the cost_limit of {self.cost_cap}"
            )
        if self.tokens_cap is not None and self.shared.tokens > self.tokens_cap:
            raise UsageLimitExceeded(
                f"The agents of this cycle spent past the total_tokens_limit of {self.tokens_cap}"
            )
        return request_context

    async def wrap_tool_execute(
        self, ctx: Any, *, call: Any, tool_def: Any, args: Any, handler: Any
    ) -> Any:
        """Run a function tool as the invocation ``NAME.TOOL``; raise
        :class:`ToolBudgetHit` instead when that is past its limit."""
        if tool_def.kind != "function":  # the output tool is the answer, not a tool call
            return await handler(args)
        invocation = f"{self.name}.{call.tool_name}"
        left = self.per_tool_left.get(invocation)
        done = self.calls.count(call.tool_name)
        if left is not None and done >= left:
            raise ToolBudgetHit(
                InvocationBudgetExhausted(invocations=done, limit=left, suggestor=invocation)
            )
        if self.total_left is not None and len(self.calls) >= self.total_left:
            raise ToolBudgetHit(
                InvocationBudgetExhausted(
                    invocations=self.total_used + len(self.calls),
                    limit=self.total_used + self.total_left,
                )
            )
        self.calls.append(call.tool_name)
        return await handler(args)
