"""An LLM agent for the workers tests: importable by reference on a worker
(``tests.workeragents:researcher``), scripted with pydantic-ai's FunctionModel."""

from __future__ import annotations

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from converge.agents import agent_suggestor

RESPONSE = RequestUsage(input_tokens=500, output_tokens=250)
LOOKUPS = 10  # tool calls before the model answers


def _model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    responses = sum(1 for m in messages if isinstance(m, ModelResponse))
    if responses < LOOKUPS:
        return ModelResponse(parts=[ToolCallPart("lookup", {"q": str(responses)})], usage=RESPONSE)
    return ModelResponse(parts=[TextPart("done")], usage=RESPONSE)


_agent: Agent[None, str] = Agent(FunctionModel(_model))


@_agent.tool_plain
def lookup(q: str) -> str:
    return f"found {q}"


researcher = agent_suggestor(
    _agent, name="researcher", reads=["input"], writes="note", price=(10.0, 30.0)
)
"""Looks up ``LOOKUPS`` times (each response 500 + 250 tokens), then answers."""
