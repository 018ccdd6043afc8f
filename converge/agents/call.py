"""One agent run under what is left of the run's budgets: :func:`call_agent`.

Budgets reach inside the call: the run gets ``UsageLimits`` from
``ctx.remaining_budget()`` minus what the cycle's agents already spent
(:class:`~converge.agents.ledger.CycleSpend`); ``UsageLimitExceeded`` becomes the
matching budget stop, with the usage spent and the messages so far in the audit
trail. A run that fails or is cut records what its responses so far cost with
``ctx.record_usage``. The result is an :class:`AgentCall`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from pydantic_ai import Agent, capture_run_messages
from pydantic_ai.exceptions import ModelAPIError, UnexpectedModelBehavior, UsageLimitExceeded
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.models import Model, infer_model
from pydantic_ai.usage import UsageLimits

from converge.agents.ledger import CallLedger, CycleSpend, ToolBudgetHit, cycle_spend
from converge.agents.pricing import (
    Price,
    PricedModel,
    cost_usd,
    model_label,
    priceable,
    reports_no_cost,
)
from converge.agents.recovered import recovered
from converge.agents.served import base_url_of, check_served
from converge.agents.spans import request_spans
from converge.agents.tape import exchanges, replaying, taped
from engine import (
    ConfigurationError,
    Context,
    CostBudgetExhausted,
    Effect,
    Error,
    ErrorCategory,
    Proposal,
    RemainingBudget,
    StopReason,
    TokenBudgetExhausted,
    Usage,
)
from engine.effect import NO_USAGE

__all__ = ["MAX_AUDITED_MESSAGES_CHARS", "AgentCall", "call_agent", "raw_outputs", "usage_of"]

MAX_AUDITED_MESSAGES_CHARS = 200_000
"""Messages recorded in the audit when a limit hits are cut to this many characters of JSON."""


@dataclass(frozen=True)
class AgentCall:
    """What one agent run gave: ``output`` (None when it stopped early), ``usage``
    (tokens; USD, 0 when unknown and ``cost_known`` is False), ``tool_calls`` (tool
    names in order), ``signal`` (a budget or configuration stop), ``audit`` (details
    for the audit trail: the model, its ``responses`` for replay
    (:mod:`converge.agents.tape`), the messages exchanged when the run stopped
    inside)."""

    output: Any = None
    usage: Usage = NO_USAGE
    tool_calls: tuple[str, ...] = ()
    signal: StopReason | None = None
    audit: dict[str, Any] = field(default_factory=dict)
    cost_known: bool = True

    def effect(self, proposals: list[Proposal]) -> Effect:
        """An :class:`Effect` with ``proposals`` and everything this call reported."""
        return Effect(
            proposals,
            usage=self.usage,
            tool_calls=self.tool_calls,
            signal=self.signal,
            audit=self.audit or None,
        )


def _needs_ledger(agent: Agent[Any, Any], tokens_cap: int | None, cost_cap: float | None) -> bool:
    """Whether a run of ``agent`` needs its :class:`CallLedger`: under a token or
    cost cap, or when it has tools (any toolset that is not an empty function
    toolset)."""
    if tokens_cap is not None or cost_cap is not None:
        return True
    return any(getattr(ts, "tools", None) != {} for ts in agent.toolsets)


def _model_of(agent: Agent[Any, Any], name: str) -> Model:
    model = agent.model
    if model is None:
        raise ConfigurationError(f"agent {name!r} has no model (give Agent(model=...))")
    return model if isinstance(model, Model) else infer_model(model)


async def call_agent(
    agent: Agent[Any, Any],
    prompt: str,
    ctx: Context,
    *,
    name: str,
    price: Price | None = None,
    tools_called: Sequence[str] = (),
) -> AgentCall:
    """Run ``agent`` on ``prompt`` under what is left of the run's budgets.

    ``name`` is the suggestor's (tool invocations are ``NAME.TOOL``);
    ``tools_called`` are the tools this execution already called in earlier runs.
    What the run's agents spent earlier in this cycle (this execution's earlier
    runs and concurrent agents, :class:`CycleSpend`) is taken off the budget too.
    Never raises for a budget: a ``UsageLimitExceeded`` or a tool past its limit
    comes back as ``signal`` with the usage and the messages so far; an
    unpriceable model under a cost budget comes back as
    ``Error(error_category="configuration")`` without calling it (a model whose
    responses may carry their own cost is called: when its response carries none
    either, the run stops after that call with the same error). A model that
    misbehaves ends typed: no valid output after pydantic-ai's output retries
    (malformed structured output, no tool call when one is required) comes back as
    ``Error(error_category="suggestor")`` naming the agent, with the raw responses
    in ``audit``; a model API that fails or cannot be reached as
    ``Error(error_category="external")`` (naming the base URL of a model on an
    OpenAI-compatible server); both with the usage so far. Before the first call
    of a run to a base URL, the server's list of models is asked for
    (:func:`~converge.agents.served.check_served`): a model it does not list comes
    back as ``Error(error_category="configuration")``, a server that cannot be
    reached as ``Error(error_category="external")``, without calling the model. Raises
    :class:`ConfigurationError` when the agent has no model; other errors of a tool
    propagate (the engine records them as a failed execution), as does a cut
    (``asyncio.CancelledError``), once the usage of the responses so far is
    recorded with ``ctx.record_usage``.

    Under ``converge replay`` the requests are answered from the recorded
    responses (:mod:`converge.agents.tape`); in a cycle a crash recovery runs
    again, from what the dead process recorded while they ask the same
    (:mod:`converge.agents.recovered`): the model is then not called, nor its
    server's list of models asked for.
    """
    model = _model_of(agent, name)
    left = ctx.remaining_budget()
    has_cost_budget = left is not None and left.cost_usd is not None
    if has_cost_budget and price is None and reports_no_cost(model) and not priceable(model):
        return AgentCall(
            signal=Error(
                message=f"{name}: the cost of model {model_label(model)} is unknown and the "
                "run has a cost budget (give the agent a price: "
                "[usd_per_million_input, usd_per_million_output])",
                error_category=ErrorCategory.CONFIGURATION,
            )
        )
    # under converge replay: the recorded responses; in a recovered cycle: the dead
    # process's, while the requests ask the same
    asked = taped(model, ctx, name) if replaying() else recovered(model, ctx, name)
    if asked is model:
        refused = await check_served(model, ctx, name)
        if refused is not None:
            return AgentCall(signal=refused, audit={"model": model_label(model)})
    with cycle_spend(ctx) as shared:
        models = (model, asked)
        return await _run(agent, prompt, ctx, name, price, tools_called, models, left, shared)


async def _run(
    agent: Agent[Any, Any],
    prompt: str,
    ctx: Context,
    name: str,
    price: Price | None,
    tools_called: Sequence[str],
    models: tuple[Model, Model],
    left: RemainingBudget | None,
    shared: CycleSpend,
) -> AgentCall:
    model, asked = models  # the agent's model, and what answers this run
    tokens_cap = None if left is None else left.tokens
    cost_cap = None if left is None else left.cost_usd
    limits = UsageLimits(
        total_tokens_limit=None if tokens_cap is None else max(0, tokens_cap - shared.tokens),
        cost_limit=None if cost_cap is None else Decimal(str(max(0.0, cost_cap - shared.cost_usd))),
    )
    per_tool = {
        k: v - sum(1 for t in tools_called if f"{name}.{t}" == k)
        for k, v in (left.per_suggestor.items() if left is not None else ())
        if k.startswith(f"{name}.")
    }
    total_left = used_before = None
    if left is not None and left.invocations is not None:
        total_left = left.invocations - 1 - len(tools_called)  # this execution is one
        used_before = int(_limit(left, "max_invocations")) - total_left
    ledger = CallLedger(
        name, per_tool, total_left, used_before or 0, shared, (tokens_cap, cost_cap), price
    )
    # the price only needs to reach pydantic-ai when its cost_limit must see it
    run_model: Model = PricedModel(asked, price) if price and cost_cap is not None else asked
    signal: StopReason | None = None
    output: Any = None
    limit_hit: UsageLimitExceeded | None = None
    # the ledger's hooks cost pydantic-ai a capability per run: only when it has
    # something to do (a token or cost cap to share, tools to count and limit)
    capabilities: list[Any] = [ledger] if _needs_ledger(agent, tokens_cap, cost_cap) else []
    spans = request_spans(model, price)
    if spans is not None:
        capabilities.append(spans)
    with capture_run_messages() as messages:
        try:
            result = await agent.run(
                prompt, model=run_model, usage_limits=limits, capabilities=capabilities
            )
            output = result.output
        except UsageLimitExceeded as exc:
            limit_hit = exc
        except ToolBudgetHit as hit:
            signal = hit.reason
        except UnexpectedModelBehavior as exc:
            signal = Error(
                message=f"{name}: model {model_label(model)} gave no valid output: {exc}",
                error_category=ErrorCategory.SUGGESTOR,
            )
        except ModelAPIError as exc:
            base = base_url_of(model)
            at = "" if base is None else f" at {base}"
            signal = Error(
                message=f"{name}: model {model_label(model)}{at} failed: "
                f"{type(exc).__name__}: {exc}",
                error_category=ErrorCategory.EXTERNAL,
            )
        except BaseException:
            # a model or tool error, or a cut (cancel, time budget): what the
            # responses so far cost still counts toward the run's budgets
            ctx.record_usage(name, usage_of(messages, price)[0])
            raise
    usage, cost_known = usage_of(messages, price)
    ledger.report(usage.total_tokens, usage.cost_usd)
    if limit_hit is not None:
        signal = _limit_signal(limit_hit, left, shared)
    # what replay needs to answer this run again without the model
    audit: dict[str, Any] = {"model": model_label(model), "responses": [exchanges(messages)]}
    if not cost_known:
        audit["cost_unknown"] = True
    if signal is not None:
        audit["stopped_inside"] = signal.kind_code()
        audit["usage_so_far"] = [usage.input_tokens, usage.output_tokens, usage.cost_usd]
        audit["messages"] = _messages_json(messages)
        raw = raw_outputs(messages)
        if raw:
            audit["raw_output"] = raw
    if signal is None and cost_cap is not None and not cost_known:
        signal = Error(
            message=f"{name}: model {model_label(model)} returned usage that cannot be priced "
            "and the run has a cost budget",
            error_category=ErrorCategory.CONFIGURATION,
        )
    return AgentCall(output, usage, tuple(ledger.calls), signal, audit, cost_known)


def usage_of(messages: Sequence[ModelMessage], price: Price | None) -> tuple[Usage, bool]:
    """The summed usage of the model responses in ``messages`` and whether their
    cost is known (USD from ``price`` when given, else each response's priced
    usage; an unknown cost counts 0 and makes the flag False)."""
    tokens_in = tokens_out = 0
    cost = Decimal(0)
    known = True
    for m in messages:
        if not isinstance(m, ModelResponse):
            continue
        u = m.usage
        tokens_in += u.input_tokens
        tokens_out += u.output_tokens
        if price is not None:
            cost += cost_usd(u.input_tokens, u.output_tokens, price)
        elif u.cost is not None:
            cost += u.cost
        elif u.input_tokens or u.output_tokens:
            known = False
    return Usage(tokens_in, tokens_out, float(cost)), known


def raw_outputs(messages: Sequence[ModelMessage], max_chars: int = 4_000) -> list[str]:
    """What the model answered, response by response: its text, or the arguments of
    its tool calls as it sent them (each cut to ``max_chars``)."""
    out: list[str] = []
    for m in messages:
        if not isinstance(m, ModelResponse):
            continue
        for part in m.parts:
            if isinstance(part, TextPart) and part.content:
                out.append(part.content[:max_chars])
            elif isinstance(part, ToolCallPart):
                args = part.args if isinstance(part.args, str) else json.dumps(part.args)
                out.append(f"{part.tool_name}({args})"[:max_chars])
    return out


def _limit_signal(
    exc: UsageLimitExceeded, left: RemainingBudget | None, shared: CycleSpend
) -> StopReason:
    """The budget stop a ``UsageLimitExceeded`` means, in the run's figures (what
    the run used before this cycle plus what its agents spent in it)."""
    text = str(exc)
    if left is not None and "cost_limit" in text and left.cost_usd is not None:
        limit = _limit(left, "max_cost_usd")
        return CostBudgetExhausted(
            cost_usd=limit - left.cost_usd + shared.cost_usd, limit_usd=limit
        )
    if left is not None and "tokens_limit" in text and left.tokens is not None:
        limit_tokens = int(_limit(left, "max_tokens"))
        return TokenBudgetExhausted(
            tokens_consumed=limit_tokens - left.tokens + shared.tokens, limit=limit_tokens
        )
    return Error(message=f"agent usage limit: {text}", error_category=ErrorCategory.RESOURCE)


def _limit(left: RemainingBudget, dimension: str) -> float:
    """The run's limit of ``dimension`` (0 when unknown)."""
    value = left.budget.limit(dimension) if left.budget is not None else None
    return float(value or 0)


def _messages_json(messages: Sequence[ModelMessage]) -> list[Any]:
    data: list[Any] = ModelMessagesTypeAdapter.dump_python(list(messages), mode="json")
    text = json.dumps(data)
    if len(text) > MAX_AUDITED_MESSAGES_CHARS:
        return [{"truncated": True, "json": text[:MAX_AUDITED_MESSAGES_CHARS]}]
    return data
