"""Usage that an execution spent but does not return (it raised, or a cancel or the
time budget cut it) still counts: ``Context.record_usage``, the agents that use it,
and the ``usage_recorded`` audit event."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from audit import open_store
from audit.queries import timeline
from converge.agents import agent_suggestor
from engine import (
    Budget,
    Context,
    Engine,
    Proposal,
    TokenBudgetExhausted,
    Usage,
    UserCancelled,
    suggestor,
)
from tests.agentfixtures import cancelled_once_started, never_answers

SPENT = Usage(input_tokens=300, output_tokens=100, cost_usd=0.25)


pytestmark = pytest.mark.usefixtures("no_model_requests")


def _failing(calls: list[int]) -> Any:
    @suggestor(name="flaky", dependencies=["go"])
    def flaky(ctx: Context) -> list[Proposal]:
        calls.append(ctx.cycle)
        ctx.record_usage("flaky", SPENT)  # paid for a model call, then failed
        raise RuntimeError("the model's answer could not be parsed")

    return flaky


@suggestor(name="ticker", dependencies=["go", "tick"])
def ticker(ctx: Context) -> list[Proposal]:
    return [Proposal("tick", ctx.cycle)] if ctx.cycle < 4 else []


@pytest.mark.parametrize("with_gate_path", [False, True])
def test_usage_recorded_by_a_failing_execution_counts_toward_the_run(
    tmp_path: Path, with_gate_path: bool
) -> None:
    # the plain fast path and the general path (a store) count it the same
    calls: list[int] = []
    store = open_store(str(tmp_path / "u.db")) if with_gate_path else None
    engine = Engine(budget=Budget(max_cycles=10), store=store, on_error="continue")
    result = engine.register(_failing(calls), ticker).run({"go": [1]}, run_id="u")
    assert calls == [1]
    assert result.usage == SPENT
    if store is not None:
        [event] = store.events("u", kinds=["usage_recorded"])
        assert event.payload == {"suggestor": "flaky", "usage": [300, 100, 0.25]}
        assert event.cycle == 1
        assert store.verify("u").ok
        notes = [n for cycle in timeline(store.events("u")) for n in cycle.notes]
        assert "flaky recorded 300+100 tokens, $0.25 it did not return" in notes
        store.close()


def test_recorded_usage_exhausts_the_token_budget() -> None:
    engine = Engine(budget=Budget(max_cycles=10, max_tokens=350), on_error="continue")
    result = engine.register(_failing([]), ticker).run({"go": [1]})
    assert result.stop_reason == TokenBudgetExhausted(tokens_consumed=400, limit=350)


@pytest.mark.parametrize("alongside", [0, 1])
def test_a_returned_plain_list_and_recorded_usage_both_count(alongside: int) -> None:
    # alone in its cycle, or with another suggestor: both paths of the plain cycle
    @suggestor(name="half", dependencies=["go"])
    def half(ctx: Context) -> list[Proposal]:
        ctx.record_usage("half", SPENT)  # e.g. a side call it paid for
        return [Proposal("done", True)]

    @suggestor(name="other", dependencies=["go"])
    def other(ctx: Context) -> list[Proposal]:
        return [Proposal("other", True)]

    engine = Engine(budget=Budget(max_cycles=5)).register(half, *[other][:alongside])
    result = engine.run({"go": [1]})
    assert result.usage == SPENT and result.context.has("done")
    assert result.context.has("other") == bool(alongside)


@pytest.mark.parametrize(
    "usage",
    [Usage(-1, 0, 0.0), Usage(1, 0, float("nan")), Usage(1.5, 0, 0.0), (1, 2, 0.0)],  # type: ignore[arg-type]
)
def test_invalid_recorded_usage_is_refused_where_it_is_recorded(usage: Any) -> None:
    with pytest.raises(TypeError, match="record_usage\\('x'\\)"):
        Context().record_usage("x", usage)


# -- agents --------------------------------------------------------------------------------
RESPONSE = RequestUsage(input_tokens=500, output_tokens=250)
PRICE = (10.0, 30.0)  # USD per million input / output tokens
RESPONSE_USD = 500 * 10.0 / 1e6 + 250 * 30.0 / 1e6


def _tool_then(then: Any) -> FunctionModel:
    """A model that calls the ``lookup`` tool (one priced response), then ``then``."""

    async def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("lookup", {"q": "x"})], usage=RESPONSE)
        result: ModelResponse = await then(messages)
        return result

    return FunctionModel(model)


def _agent(model: FunctionModel) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(model)

    @agent.tool_plain
    def lookup(q: str) -> str:
        return f"found {q}"

    return agent


def test_an_agent_whose_model_fails_after_a_response_counts_that_response() -> None:
    async def broken(messages: list[ModelMessage]) -> ModelResponse:
        raise ConnectionError("the provider dropped the connection")

    engine = Engine(budget=Budget(max_cycles=3), on_error="continue")
    engine.register(
        agent_suggestor(
            _agent(_tool_then(broken)), name="w", reads=["topic"], writes="out", price=PRICE
        )
    )
    result = engine.run({"topic": ["t"]})
    assert result.usage == Usage(500, 250, RESPONSE_USD)
    assert not result.context.has("out")


def test_an_agent_per_group_counts_the_runs_before_the_one_that_failed() -> None:
    runs: list[str] = []

    async def answer_once(messages: list[ModelMessage]) -> ModelResponse:
        runs.append("answered")
        if len(runs) > 1:
            raise ConnectionError("the provider dropped the connection")
        return ModelResponse(parts=[TextPart("MIT")], usage=RESPONSE)

    engine = Engine(budget=Budget(max_cycles=3), on_error="continue")
    engine.register(
        agent_suggestor(
            _agent(_tool_then(answer_once)),
            name="w",
            reads=["pkg"],
            writes="license",
            per="name",
            price=PRICE,
        )
    )
    result = engine.run({"pkg": [{"name": "a"}, {"name": "b"}]})
    # run a: two responses; run b: the tool-call response, then the failure
    assert result.usage == Usage(1500, 750, 3 * RESPONSE_USD)


def test_a_cancel_cuts_an_agent_and_its_responses_so_far_still_count() -> None:
    started = asyncio.Event()

    async def hang(messages: list[ModelMessage]) -> ModelResponse:
        return await never_answers(started)

    engine = Engine(budget=Budget(max_cycles=3))
    engine.register(
        agent_suggestor(
            _agent(_tool_then(hang)), name="w", reads=["topic"], writes="out", price=PRICE
        )
    )
    result = cancelled_once_started(engine, started, {"topic": ["t"]}, "cut")
    assert isinstance(result.stop_reason, UserCancelled)
    assert result.usage == Usage(500, 250, RESPONSE_USD)
