"""A pydantic-ai agent as a suggestor: :class:`AgentSuggestor`.

Built from Python with :func:`agent_suggestor` (an ``Agent`` you made) or from a
job file's ``agents:`` entry with :func:`build_agent` (a model string,
instructions, an output type and tools). Its prompt lists the facts of the keys
it ``reads``; its output (a pydantic model, a list of them, or ``str``) becomes
proposals on ``writes`` (:func:`to_proposals`) whose parents are those facts.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from pydantic import BaseModel
from pydantic_ai import Agent

from converge.agents.call import call_agent
from converge.agents.endpoint import resolve_model
from converge.agents.ledger import cycle_spend
from converge.agents.pricing import Price
from engine import (
    ConfigurationError,
    Context,
    Effect,
    Fact,
    Proposal,
    StopReason,
    Usage,
)
from engine.effect import NO_USAGE

__all__ = [
    "AgentSuggestor",
    "PromptSpec",
    "agent_suggestor",
    "build_agent",
    "default_prompt",
    "to_proposals",
]

PromptSpec = str | Callable[[Context], str] | None


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
                runs_so_far = audit.get("responses", [])
                audit.update(call.audit)
                audit["responses"] = runs_so_far + call.audit.get("responses", [])
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
    base_url: str | None = None,
    model_settings: dict[str, Any] | None = None,
) -> AgentSuggestor:
    """An agent suggestor from a job file's ``agents:`` entry: a pydantic-ai model
    string (``test`` = the offline TestModel), instructions, an output type and
    plain tool functions. ``base_url`` (default ``$CONVERGE_MODEL_BASE_URL``) points
    ``openai:NAME`` at an OpenAI-compatible server's chat completions
    (:func:`~converge.agents.endpoint.resolve_model`); ``model_settings`` is
    pydantic-ai's ``ModelSettings`` of every request. Raises
    :class:`ConfigurationError` naming the model when pydantic-ai cannot use it
    (unknown provider, missing API key or package, a base URL for another provider)."""
    try:
        resolved = resolve_model(model, base_url)
        agent: Agent[None, Any] = Agent(
            resolved,
            instructions=instructions or None,
            output_type=output,
            tools=list(tools),
            model_settings=model_settings or None,  # type: ignore[arg-type]
        )
    except Exception as exc:  # pydantic-ai raises UserError, ImportError, ValueError...
        raise ConfigurationError(
            f"model {model!r} cannot be used: {type(exc).__name__}: {exc}"
        ) from exc
    return AgentSuggestor(
        agent, name=name, reads=reads, writes=writes, prompt=prompt, price=price, per=per
    )
