"""LLM agents as suggestors (docs/agents.md), built on pydantic-ai (extra ``agents``).

An agent is a suggestor like any other, so budgets, gates, stop policies and the
audit see it the same way:

- :func:`agent_suggestor` wraps a ``pydantic_ai.Agent``: its prompt is built from
  the facts of the keys it ``reads``; its output (a pydantic model, a list of them,
  or ``str``) becomes proposals on ``writes`` whose parents are those facts.
- Usage: the agent's ``RunUsage`` becomes the execution's :class:`engine.Usage`
  (tokens, and USD from pydantic-ai's priced usage, i.e. genai-prices, or from
  ``price=``). A cost that cannot be known, in a run with a cost budget, is a
  configuration error (``Error(error_category="configuration")``), never a zero.
- Budgets reach inside the call: each agent run gets ``UsageLimits`` from
  ``ctx.remaining_budget()``; ``UsageLimitExceeded`` becomes the matching budget
  stop, with the usage spent and the messages so far in the audit trail.
- An agent run that fails (a model or tool error) or is cut (``Engine.cancel()``,
  the time budget) records what its responses so far cost with
  ``ctx.record_usage``: it still counts toward the run's budgets.
- Tool calls inside the agent are invocations ``NAME.TOOL``
  (:attr:`engine.Effect.tool_calls`): ``per_suggestor`` limits of a tool and the
  invocation budget are enforced before the tool runs.

:func:`call_agent` is the building block: one agent run under the run's budgets,
for suggestors that call an agent several times (see
``examples/dependency_audit/reviewer.py``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from pydantic import BaseModel

from engine import (
    ConfigurationError,
    Context,
    CostBudgetExhausted,
    Effect,
    Error,
    ErrorCategory,
    Fact,
    InvocationBudgetExhausted,
    Proposal,
    RemainingBudget,
    StopReason,
    TokenBudgetExhausted,
    Usage,
)
from engine.effect import NO_USAGE

try:
    import genai_prices
    from pydantic_ai import Agent, capture_run_messages
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.exceptions import UsageLimitExceeded
    from pydantic_ai.messages import (
        ModelMessage,
        ModelMessagesTypeAdapter,
        ModelResponse,
    )
    from pydantic_ai.models import Model, ModelRequestParameters, infer_model
    from pydantic_ai.models.wrapper import WrapperModel
    from pydantic_ai.settings import ModelSettings
    from pydantic_ai.usage import UsageLimits
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ConfigurationError(
        "LLM agents need the 'agents' extra: pip install 'converge[agents]' "
        f"({exc.name} is missing)"
    ) from exc

__all__ = [
    "AgentCall",
    "AgentSuggestor",
    "CycleSpend",
    "Price",
    "agent_suggestor",
    "build_agent",
    "call_agent",
    "cycle_spend",
    "model_label",
]

Price = tuple[float, float]
"""``(usd_per_million_input_tokens, usd_per_million_output_tokens)``."""

PromptSpec = str | Callable[[Context], str] | None

MAX_AUDITED_MESSAGES_CHARS = 200_000
"""Messages recorded in the audit when a limit hits are cut to this many characters of JSON."""


# -- pricing ---------------------------------------------------------------------------
class _PricedModel(WrapperModel):
    """A model whose responses carry the cost of ``price`` (per million tokens), so
    pydantic-ai's ``cost_limit`` applies to models genai-prices does not know."""

    def __init__(self, wrapped: Model, price: Price) -> None:
        super().__init__(wrapped)
        self.price = price

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        response = await super().request(messages, model_settings, model_request_parameters)
        response.usage.cost = _cost(
            response.usage.input_tokens, response.usage.output_tokens, self.price
        )
        return response


def _cost(input_tokens: int, output_tokens: int, price: Price) -> Decimal:
    usd_in, usd_out = (Decimal(str(p)) for p in price)
    return (input_tokens * usd_in + output_tokens * usd_out) / Decimal(1_000_000)


def model_label(model: Model) -> str:
    """``system:model_name`` of a pydantic-ai model, as error messages name it."""
    return f"{model.system}:{model.model_name}"


def priceable(model: Model) -> bool:
    """True when genai-prices knows this model's price (by provider, else by name)."""
    probe = genai_prices.Usage(input_tokens=1, output_tokens=1)
    for provider in (model.system, None):
        try:
            genai_prices.calc_price(probe, model.model_name, provider_id=provider)
            return True
        except (LookupError, ValueError):
            continue
    return False


# -- tool calls as invocations ---------------------------------------------------------------
class _ToolBudgetHit(Exception):
    """Raised inside the agent run before a tool call past its limit (never escapes)."""

    def __init__(self, reason: InvocationBudgetExhausted) -> None:
        super().__init__(str(reason))
        self.reason = reason


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
        return float(_cost(usage.input_tokens, usage.output_tokens, price))
    return float(usage.cost) if usage.cost is not None else 0.0


class _CallLedger(AbstractCapability[Any]):
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
        if tool_def.kind != "function":  # the output tool is the answer, not a tool call
            return await handler(args)
        invocation = f"{self.name}.{call.tool_name}"
        left = self.per_tool_left.get(invocation)
        done = self.calls.count(call.tool_name)
        if left is not None and done >= left:
            raise _ToolBudgetHit(
                InvocationBudgetExhausted(invocations=done, limit=left, suggestor=invocation)
            )
        if self.total_left is not None and len(self.calls) >= self.total_left:
            raise _ToolBudgetHit(
                InvocationBudgetExhausted(
                    invocations=self.total_used + len(self.calls),
                    limit=self.total_used + self.total_left,
                )
            )
        self.calls.append(call.tool_name)
        return await handler(args)


# -- one agent run ----------------------------------------------------------------------------
@dataclass(frozen=True)
class AgentCall:
    """What one agent run gave: ``output`` (None when it stopped early), ``usage``
    (tokens; USD, 0 when unknown and ``cost_known`` is False), ``tool_calls`` (tool
    names in order), ``signal`` (a budget or configuration stop), ``audit`` (details
    for the audit trail: the messages exchanged when the run stopped inside)."""

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
    ``Error(error_category="configuration")`` without calling it. Raises
    :class:`ConfigurationError` when the agent has no model; other errors of the
    model or of a tool propagate (the engine records them as a failed execution),
    as does a cut (``asyncio.CancelledError``), once the usage of the responses so
    far is recorded with ``ctx.record_usage``.
    """
    model = _model_of(agent, name)
    left = ctx.remaining_budget()
    has_cost_budget = left is not None and left.cost_usd is not None
    if has_cost_budget and price is None and not priceable(model):
        return AgentCall(
            signal=Error(
                message=f"{name}: the cost of model {model_label(model)} is unknown and the "
                "run has a cost budget (give the agent a price: "
                "[usd_per_million_input, usd_per_million_output])",
                error_category=ErrorCategory.CONFIGURATION,
            )
        )
    with cycle_spend(ctx) as shared:
        return await _run(agent, prompt, ctx, name, price, tools_called, model, left, shared)


async def _run(
    agent: Agent[Any, Any],
    prompt: str,
    ctx: Context,
    name: str,
    price: Price | None,
    tools_called: Sequence[str],
    model: Model,
    left: RemainingBudget | None,
    shared: CycleSpend,
) -> AgentCall:
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
    ledger = _CallLedger(
        name, per_tool, total_left, used_before or 0, shared, (tokens_cap, cost_cap), price
    )
    # the price only needs to reach pydantic-ai when its cost_limit must see it
    run_model: Model = _PricedModel(model, price) if price and cost_cap is not None else model
    signal: StopReason | None = None
    output: Any = None
    limit_hit: UsageLimitExceeded | None = None
    with capture_run_messages() as messages:
        try:
            result = await agent.run(
                prompt, model=run_model, usage_limits=limits, capabilities=[ledger]
            )
            output = result.output
        except UsageLimitExceeded as exc:
            limit_hit = exc
        except _ToolBudgetHit as hit:
            signal = hit.reason
        except BaseException:
            # a model or tool error, or a cut (cancel, time budget): what the
            # responses so far cost still counts toward the run's budgets
            ctx.record_usage(name, usage_of(messages, price)[0])
            raise
    usage, cost_known = usage_of(messages, price)
    ledger.report(usage.total_tokens, usage.cost_usd)
    if limit_hit is not None:
        signal = _limit_signal(limit_hit, left, shared)
    audit: dict[str, Any] = {"model": model_label(model)}
    if not cost_known:
        audit["cost_unknown"] = True
    if signal is not None:
        audit["stopped_inside"] = signal.kind_code()
        audit["usage_so_far"] = [usage.input_tokens, usage.output_tokens, usage.cost_usd]
        audit["messages"] = _messages_json(messages)
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
            cost += _cost(u.input_tokens, u.output_tokens, price)
        elif u.cost is not None:
            cost += u.cost
        elif u.input_tokens or u.output_tokens:
            known = False
    return Usage(tokens_in, tokens_out, float(cost)), known


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


# -- the suggestor -----------------------------------------------------------------------------
def default_prompt(facts: Sequence[Fact]) -> str:
    """One line per fact: ``- KEY (id ID): JSON content``."""
    lines = [f"- {f.key} (id {f.id}): {json.dumps(f.content, sort_keys=True)}" for f in facts]
    return "Facts:\n" + "\n".join(lines)


class AgentSuggestor:
    """A pydantic-ai agent as an async suggestor (see :func:`agent_suggestor`)."""

    is_async = True
    gen_ai_operation = "invoke_agent"
    defined_in: str | None = None
    """The module that built it (:func:`agent_suggestor`'s caller), where a worker
    looks for its module-level name."""

    def __init__(
        self,
        agent: Agent[Any, Any],
        *,
        name: str,
        reads: Sequence[str],
        writes: str,
        prompt: PromptSpec = None,
        price: Price | None = None,
        per: str | None = None,
    ) -> None:
        if not reads:
            raise ConfigurationError(f"agent {name!r}: reads must name at least one key")
        if price is not None and (len(price) != 2 or any(p < 0 for p in price)):
            raise ConfigurationError(
                f"agent {name!r}: price must be [usd_per_million_input, usd_per_million_output]"
            )
        if per is not None and callable(prompt):
            raise ConfigurationError(f"agent {name!r}: with per=, give prompt as a template")
        self.agent = agent
        self.name = name
        self.reads = tuple(reads)
        self.dependencies = frozenset(reads)
        self.writes = writes
        self.prompt = prompt
        self.price = price
        self.per = per

    def accepts(self, ctx: Context) -> bool:
        """Only when there is something to read."""
        return any(ctx.has(k) for k in self.reads)

    def build_prompt(self, ctx: Context, facts: Sequence[Fact]) -> str:
        """The prompt: the template with ``{facts}`` filled, the callable's text, or
        :func:`default_prompt`."""
        if self.prompt is None:
            return default_prompt(facts)
        if isinstance(self.prompt, str):
            return self.prompt.replace("{facts}", default_prompt(facts))
        return self.prompt(ctx)

    async def execute(self, ctx: Context) -> Effect:
        """Agent runs; their output as proposals on ``writes`` (see :func:`agent_suggestor`)."""
        facts = [f for key in self.reads for f in ctx.get(key)]
        if self.per is None:
            call = await call_agent(
                self.agent, self.build_prompt(ctx, facts), ctx, name=self.name, price=self.price
            )
            parents = tuple(f.id for f in facts)
            proposals = (
                to_proposals(call.output, self.writes, parents) if call.signal is None else []
            )
            return call.effect(proposals)
        return await self._execute_per_group(ctx, facts)

    async def _execute_per_group(self, ctx: Context, facts: list[Fact]) -> Effect:
        """One run per group of facts sharing ``content[per]``, one after the other so
        that each is capped by what the previous ones spent; a group a fact on
        ``writes`` already derives from is not asked again."""
        groups: dict[str, list[Fact]] = {}
        for f in facts:
            value = f.content.get(self.per) if isinstance(f.content, dict) else None
            groups.setdefault(json.dumps(value, sort_keys=True), []).append(f)
        answered = {p for f in ctx.get(self.writes) for p in f.provenance.parents}
        proposals: list[Proposal] = []
        spent = NO_USAGE
        tools: list[str] = []
        signal: StopReason | None = None
        audit: dict[str, Any] = {}
        runs = 0
        with cycle_spend(ctx), _recorded_on_failure(ctx, self.name, lambda: spent):
            # cycle_spend: each run sees what the previous ones spent
            for value_key, group in groups.items():
                if any(f.id in answered for f in group):
                    continue
                call = await call_agent(
                    self.agent,
                    self.build_prompt(ctx, group),
                    ctx,
                    name=self.name,
                    price=self.price,
                    tools_called=tools,
                )
                runs += 1
                spent = spent + call.usage
                tools.extend(call.tool_calls)
                audit.update(call.audit)
                if call.signal is not None:
                    signal = call.signal
                    break
                parents = tuple(f.id for f in group)
                for p in to_proposals(call.output, self.writes, parents):
                    # the answer is about this group, whatever the model wrote there
                    if isinstance(p.content, dict) and self.per in p.content:
                        p = p._replace(content={**p.content, self.per: json.loads(value_key)})
                    proposals.append(p)
        audit["agent_runs"] = runs
        return Effect(proposals, usage=spent, tool_calls=tuple(tools), signal=signal, audit=audit)

    def __repr__(self) -> str:
        return f"<agent {self.name} reads={list(self.reads)} writes={self.writes}>"


@contextmanager
def _recorded_on_failure(ctx: Context, name: str, spent: Callable[[], Usage]) -> Iterator[None]:
    """Record ``spent()`` with ``ctx.record_usage`` when the block raises or is cut:
    the usage of the agent runs that finished before (the failing run records its own)."""
    try:
        yield
    except BaseException:
        ctx.record_usage(name, spent())
        raise


def to_proposals(output: Any, key: str, parents: tuple[str, ...]) -> list[Proposal]:
    """One proposal per item of ``output`` (a model, a list of them, ``str`` or any
    JSON value) on ``key``, with ``parents`` and the item's ``confidence`` field."""
    if output is None:
        return []
    items = output if isinstance(output, list) else [output]
    out: list[Proposal] = []
    for item in items:
        confidence = 1.0
        if isinstance(item, BaseModel):
            value = getattr(item, "confidence", None)
            if isinstance(value, int | float) and 0 <= value <= 1:
                confidence = float(value)
            content: Any = item.model_dump(mode="json")
        else:
            content = item
        out.append(Proposal(key, content, confidence, parents))
    return out


def agent_suggestor(
    agent: Agent[Any, Any],
    *,
    name: str,
    reads: Sequence[str],
    writes: str,
    prompt: PromptSpec = None,
    price: Price | None = None,
    per: str | None = None,
) -> AgentSuggestor:
    """A pydantic-ai ``Agent`` as an async suggestor (docs/agents.md).

    ``reads``: the context keys it depends on; its prompt lists their facts
    (``prompt``: a template over ``{facts}``, or a callable ``(Context) -> str``).
    ``writes``: the key of its proposals, one per output item (``content =
    model_dump(mode="json")``, ``parents`` = the facts' ids, ``confidence`` = the
    output's ``confidence`` field when it has one). ``price``: ``(USD per million
    input tokens, USD per million output tokens)``, overriding genai-prices.
    ``per``: a content field; one agent run per group of facts sharing its value
    (e.g. one per package), each group's facts the parents of its proposals (whose
    own ``per`` field, when they have one, is set to the group's value), and a
    group already answered on ``writes`` not asked again.
    Raises :class:`ConfigurationError` for empty ``reads``, a bad ``price``, or a
    callable ``prompt`` with ``per``.
    """
    made = AgentSuggestor(
        agent, name=name, reads=reads, writes=writes, prompt=prompt, price=price, per=per
    )
    # the caller's module: where a module-level agent is bound, for the module:attr
    # reference a Celery worker imports (converge.workers.reference_of)
    made.defined_in = sys._getframe(1).f_globals.get("__name__")
    return made


def build_agent(
    *,
    name: str,
    model: str,
    instructions: str,
    reads: Sequence[str],
    writes: str,
    output: Any = str,
    tools: Sequence[Callable[..., Any]] = (),
    price: Price | None = None,
    prompt: str | None = None,
    per: str | None = None,
) -> AgentSuggestor:
    """An agent suggestor from a job file's ``agents:`` entry: a pydantic-ai model
    string (``test`` = the offline TestModel), instructions, an output type and
    plain tool functions. Raises :class:`ConfigurationError` naming the model when
    pydantic-ai cannot use it (unknown provider, missing API key or package)."""
    try:
        resolved = infer_model(model)
        agent: Agent[None, Any] = Agent(
            resolved, instructions=instructions or None, output_type=output, tools=list(tools)
        )
    except Exception as exc:  # pydantic-ai raises UserError, ImportError, ValueError...
        raise ConfigurationError(
            f"model {model!r} cannot be used: {type(exc).__name__}: {exc}"
        ) from exc
    return AgentSuggestor(
        agent, name=name, reads=reads, writes=writes, prompt=prompt, price=price, per=per
    )
