"""The spans a trace viewer needs from agent runs, in memory: a span per model
request under its agent's span with that response's tokens, token attributes on a
failed agent call, status ERROR on a call cut by the time budget (the same spans
reach Phoenix in tests/test_phoenix.py)."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from converge.agents import agent_suggestor
from converge.telemetry import Tracing
from engine import Budget, Engine, TimeBudgetExhausted

pytestmark = pytest.mark.usefixtures("no_model_requests")


def traced(model: FunctionModel, budget: Budget) -> tuple[list[ReadableSpan], Any]:
    exporter = InMemorySpanExporter()
    tracing = Tracing.start(exporter)

    def lookup(query: str) -> str:
        """Look a license up."""
        return f"found {query}"

    agent: Agent[None, str] = Agent(model, tools=[lookup])
    engine = Engine(budget=budget)
    engine.register(agent_suggestor(agent, name="reviewer", reads=["topic"], writes="review"))
    result = tracing.run(tracing.instrument(engine), "review", {"topic": ["left-pad"]})
    tracing.shutdown()
    return list(exporter.get_finished_spans()), result


def tool_then(last: Any) -> Any:
    """A model that calls ``lookup`` (usage 70/7), then does ``last``."""

    async def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(
                parts=[ToolCallPart("lookup", {"query": "MIT"})],
                usage=RequestUsage(input_tokens=70, output_tokens=7),
            )
        return await last()

    return model


def test_each_model_request_is_a_chat_span_under_its_agent_with_that_responses_tokens() -> None:
    async def answer() -> ModelResponse:
        return ModelResponse(
            parts=[TextPart("MIT")], usage=RequestUsage(input_tokens=90, output_tokens=3)
        )

    spans, result = traced(FunctionModel(tool_then(answer), model_name="m"), Budget(max_cycles=3))
    assert result.stop_reason.is_success()
    agent = next(s for s in spans if s.name == "invoke_agent reviewer")
    chats = sorted((s for s in spans if s.name == "chat m"), key=lambda s: s.start_time or 0)
    assert len(chats) == 2
    for chat in chats:
        assert chat.parent is not None and chat.parent.span_id == agent.context.span_id
        assert dict(chat.attributes or {})["gen_ai.operation.name"] == "chat"
        assert dict(chat.attributes or {})["gen_ai.request.model"] == "m"
    tokens = [
        (s.attributes["gen_ai.usage.input_tokens"], s.attributes["gen_ai.usage.output_tokens"])
        for s in chats
        if s.attributes is not None
    ]
    assert tokens == [(70, 7), (90, 3)]
    assert dict(agent.attributes or {})["gen_ai.usage.input_tokens"] == 160


def test_a_failed_agent_call_keeps_its_tokens_on_its_span_and_ends_in_error() -> None:
    async def fail() -> ModelResponse:
        raise RuntimeError("the model's tool broke")

    spans, result = traced(FunctionModel(tool_then(fail), model_name="m"), Budget(max_cycles=3))
    assert not result.stop_reason.is_success()
    agent = next(s for s in spans if s.name == "invoke_agent reviewer")
    attrs = dict(agent.attributes or {})
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (70, 7)
    assert agent.status.status_code is StatusCode.ERROR
    failed = [s for s in spans if s.name == "chat m" and s.status.status_code is StatusCode.ERROR]
    assert len(failed) == 1


def test_a_call_cut_by_the_time_budget_ends_in_error_with_the_tokens_so_far() -> None:
    import asyncio

    async def hang() -> ModelResponse:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    spans, result = traced(FunctionModel(tool_then(hang), model_name="m"), Budget(max_seconds=0.3))
    assert isinstance(result.stop_reason, TimeBudgetExhausted)
    agent = next(s for s in spans if s.name == "invoke_agent reviewer")
    assert agent.status.status_code is StatusCode.ERROR
    attrs = dict(agent.attributes or {})
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (70, 7)
    cut = [s for s in spans if s.name == "chat m" and s.status.status_code is StatusCode.ERROR]
    assert len(cut) == 1
    run = next(s for s in spans if s.name == "invoke_workflow review")
    assert dict(run.attributes or {})["converge.stop_reason"] == "time_budget_exhausted"
