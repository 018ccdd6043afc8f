"""LLM agents as suggestors: exact usage and cost, budgets inside each call, tool
calls as invocations, two agents that disagree, cancellation. Models are scripted
with pydantic-ai's FunctionModel and exact RequestUsage; nothing reaches a network."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from pathlib import Path
from typing import Any

import genai_prices
import pytest
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import RequestUsage

from audit import open_store
from converge.agents import agent_suggestor
from engine import (
    Budget,
    Context,
    CostBudgetExhausted,
    CriteriaMet,
    CriterionResult,
    CycleBudgetExhausted,
    Engine,
    Error,
    ErrorCategory,
    Finished,
    InvocationBudgetExhausted,
    LoopDetected,
    Met,
    Proposal,
    TimeBudgetExhausted,
    TokenBudgetExhausted,
    Unmet,
    UserCancelled,
    suggestor,
)
from gates.policies import policies_from_specs
from tests.agentfixtures import cancelled_once_started, never_answers

PRICE = (10.0, 30.0)  # USD per million input / output tokens
RESPONSE = RequestUsage(input_tokens=500, output_tokens=250)
RESPONSE_USD = 500 * 10.0 / 1e6 + 250 * 30.0 / 1e6  # 0.0125


pytestmark = pytest.mark.usefixtures("no_model_requests")


class Writer:
    """A scripted model: each agent run calls the ``lookup`` tool once, then answers
    ``draft N`` (N counts the runs); every response has the usage ``RESPONSE``."""

    def __init__(self, tool_calls: int = 1, model_name: str | None = None) -> None:
        self.runs = 0
        self.tool_calls = tool_calls
        self.model_name = model_name
        self.responses: list[RequestUsage] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls_so_far = sum(
            1
            for m in messages
            if isinstance(m, ModelResponse)
            for p in m.parts
            if isinstance(p, ToolCallPart)
        )
        usage = RequestUsage(
            input_tokens=RESPONSE.input_tokens, output_tokens=RESPONSE.output_tokens
        )
        self.responses.append(usage)
        if len(messages) == 1:
            self.runs += 1
        if calls_so_far < self.tool_calls:
            part: Any = ToolCallPart("lookup", {"query": f"q{calls_so_far}"})
        else:
            part = TextPart(f"draft {self.runs}")
        return ModelResponse(parts=[part], usage=usage, model_name=self.model_name)


def writer_agent(script: Writer, looked_up: list[str] | None = None) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(FunctionModel(script, model_name=script.model_name))

    @agent.tool_plain
    def lookup(query: str) -> str:
        if looked_up is not None:
            looked_up.append(query)
        return f"result of {query}"

    return agent


def writer_engine(
    script: Writer, budget: Budget, looked_up: list[str] | None = None, **kwargs: Any
) -> Engine:
    """An agent that reads the topic and its own drafts, so it runs every cycle."""
    eng = Engine(budget=budget, **kwargs)
    agent = writer_agent(script, looked_up)
    eng.register(
        agent_suggestor(agent, name="writer", reads=["topic", "draft"], writes="draft", price=PRICE)
    )
    return eng


# -- usage and cost --------------------------------------------------------------------------
def test_tokens_and_usd_of_a_run_equal_the_sum_of_the_model_responses() -> None:
    script = Writer()
    eng = writer_engine(script, Budget(max_cycles=3))
    result = eng.run({"topic": ["licenses"]})
    assert isinstance(result.stop_reason, CycleBudgetExhausted)
    assert len(script.responses) == 6  # 3 runs x (tool call + answer)
    assert result.usage.input_tokens == sum(r.input_tokens for r in script.responses)
    assert result.usage.output_tokens == sum(r.output_tokens for r in script.responses)
    assert round(result.usage.cost_usd, 2) == round(6 * RESPONSE_USD, 2)
    assert result.usage.cost_usd == pytest.approx(6 * RESPONSE_USD, abs=1e-12)


def test_without_a_price_the_cost_is_pydantic_ais_priced_usage_from_genai_prices() -> None:
    script = Writer(model_name="gpt-4o-mini")
    eng = Engine(budget=Budget(max_cycles=2, max_cost_usd=10.0))
    eng.register(
        agent_suggestor(
            writer_agent(script), name="writer", reads=["topic", "draft"], writes="draft"
        )
    )
    result = eng.run({"topic": ["licenses"]})
    one = genai_prices.calc_price(
        genai_prices.Usage(input_tokens=500, output_tokens=250), "gpt-4o-mini"
    )
    assert one.total_price > 0
    assert Decimal(str(result.usage.cost_usd)) == pytest.approx(4 * one.total_price)


def test_max_cost_usd_stops_at_the_call_that_crosses_it_overspending_at_most_one_response() -> None:
    script = Writer()
    # 2 runs cost 0.05; the third may spend 0.01 more: its first response (0.0125) crosses
    eng = writer_engine(script, Budget(max_cycles=10, max_cost_usd=0.06))
    result = eng.run({"topic": ["licenses"]})
    assert isinstance(result.stop_reason, CostBudgetExhausted)
    assert result.stop_reason.limit_usd == 0.06
    assert len(script.responses) == 5  # the third run was stopped after one response
    assert result.usage.cost_usd == pytest.approx(5 * RESPONSE_USD)
    assert result.stop_reason.cost_usd == pytest.approx(5 * RESPONSE_USD)
    assert 0 < result.usage.cost_usd - 0.06 <= RESPONSE_USD
    assert [f.content for f in result.context.get("draft")] == ["draft 1", "draft 2"]


def test_concurrent_agents_share_what_is_left_so_the_run_overspends_by_one_response_each() -> None:
    scripts = [Writer(tool_calls=3) for _ in range(5)]  # 4 responses per agent run

    def interleaved(script: Writer) -> Any:
        async def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            await asyncio.sleep(0)  # let the other agents' runs go on
            return script(messages, info)

        return model

    eng = Engine(budget=Budget(max_cycles=3, max_cost_usd=4 * RESPONSE_USD))
    for i, script in enumerate(scripts):
        agent: Agent[None, str] = Agent(FunctionModel(interleaved(script)))

        @agent.tool_plain
        def lookup(query: str) -> str:
            return query

        eng.register(
            agent_suggestor(agent, name=f"w{i}", reads=["topic"], writes=f"d{i}", price=PRICE)
        )
    result = eng.run({"topic": ["licenses"]})
    assert isinstance(result.stop_reason, CostBudgetExhausted)
    responses = sum(len(s.responses) for s in scripts)
    assert result.usage.cost_usd == pytest.approx(responses * RESPONSE_USD)
    # alone, each agent would have spent the whole budget: 20 responses
    assert responses <= 4 + len(scripts)
    assert result.usage.cost_usd - 4 * RESPONSE_USD <= len(scripts) * RESPONSE_USD + 1e-9


def test_an_unpriceable_model_under_a_cost_budget_is_a_configuration_error_naming_it() -> None:
    eng = Engine(budget=Budget(max_cost_usd=1.0))
    eng.register(agent_suggestor(Agent(TestModel()), name="t", reads=["topic"], writes="out"))
    result = eng.run({"topic": ["x"]})
    assert isinstance(result.stop_reason, Error)
    assert result.stop_reason.error_category is ErrorCategory.CONFIGURATION
    assert "test:test" in result.stop_reason.message
    assert result.usage.total_tokens == 0  # the model was never called


def test_an_unpriceable_model_without_a_cost_budget_runs_and_counts_its_tokens() -> None:
    eng = Engine(budget=Budget(max_cycles=3))
    eng.register(agent_suggestor(Agent(TestModel()), name="t", reads=["topic"], writes="out"))
    result = eng.run({"topic": ["x"]})
    assert result.stop_reason.is_success()
    assert result.usage.total_tokens > 0
    assert len(result.context.get("out")) == 1


# -- limits inside a call --------------------------------------------------------------------
def test_usage_limit_inside_a_call_stops_with_the_token_budget_keeping_facts_and_messages(
    tmp_path: Path,
) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'a.db'}")
    script = Writer()
    # one run uses 1500 tokens; the second may use 500: its first response (750) crosses
    eng = writer_engine(script, Budget(max_cycles=10, max_tokens=2000), store=store)
    result = eng.run({"topic": ["licenses"]})
    assert result.stop_reason == TokenBudgetExhausted(tokens_consumed=2250, limit=2000)
    assert [f.content for f in result.context.get("draft")] == ["draft 1"]
    events = store.events(result.run_id, ["suggestor_executed"])
    stopped = events[-1].payload
    assert stopped["stopped_inside"] == "token_budget_exhausted"
    assert stopped["usage_so_far"][:2] == [500, 250]
    assert stopped["usage"][:2] == [500, 250]
    kinds = [m["kind"] for m in stopped["messages"]]
    assert kinds == ["request", "response"]
    assert stopped["messages"][1]["parts"][0]["tool_name"] == "lookup"


# -- tool calls as invocations ------------------------------------------------------------------
def test_stop_on_tool_fires_on_a_tool_called_inside_an_agent() -> None:
    script = Writer()
    eng = writer_engine(
        script,
        Budget(max_cycles=10),
        stop_policies=policies_from_specs([{"type": "stop_on_tool", "tool_name": "writer.lookup"}]),
    )
    result = eng.run({"topic": ["licenses"]})
    assert result.stop_reason == Finished(
        suggestor="writer.lookup", message=result.stop_reason.message
    )
    assert script.runs == 1


def test_per_suggestor_limit_counts_agent_tool_calls_and_refuses_the_one_past_it() -> None:
    looked_up: list[str] = []
    script = Writer(tool_calls=3)
    eng = writer_engine(
        script, Budget(max_cycles=10, per_suggestor={"writer.lookup": 2}), looked_up=looked_up
    )
    result = eng.run({"topic": ["licenses"]})
    assert result.stop_reason == InvocationBudgetExhausted(
        invocations=2, limit=2, suggestor="writer.lookup"
    )
    assert looked_up == ["q0", "q1"]  # the third call never ran
    assert result.budget_status.dimensions["suggestor:writer.lookup"].used == 2


def test_the_invocation_budget_counts_agent_tool_calls() -> None:
    looked_up: list[str] = []
    script = Writer(tool_calls=5)
    eng = writer_engine(script, Budget(max_cycles=10, max_invocations=4), looked_up=looked_up)
    result = eng.run({"topic": ["licenses"]})
    assert result.stop_reason == InvocationBudgetExhausted(invocations=4, limit=4)
    assert looked_up == ["q0", "q1", "q2"]  # the execution itself is the fourth


# -- two agents that disagree ---------------------------------------------------------------------
class Draft(BaseModel):
    text: str
    version: int


class Critique(BaseModel):
    verdict: str  # "accept" or "reject"
    note: str
    confidence: float


def output_call(info: AgentInfo, args: dict[str, Any]) -> ModelResponse:
    return ModelResponse(
        parts=[ToolCallPart(info.output_tools[0].name, args)],
        usage=RequestUsage(input_tokens=100, output_tokens=20),
    )


def proposer_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    prompt = str(messages[0].parts[-1].content)  # type: ignore[union-attr]
    version = prompt.count('"verdict": "reject"') + 1
    return output_call(info, {"text": f"answer v{version}", "version": version})


def disagreeing_pair(critic_accepts_at: int | None, **kwargs: Any) -> Engine:
    def critic_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompt = str(messages[0].parts[-1].content)  # type: ignore[union-attr]
        version = max(int(v) for v in __import__("re").findall(r'"version": (\d+)', prompt))
        accept = critic_accepts_at is not None and version >= critic_accepts_at
        return output_call(
            info,
            {
                "verdict": "accept" if accept else "reject",
                "note": f"on v{version}",
                "confidence": 0.9,
            },
        )

    proposer: Agent[None, Draft] = Agent(FunctionModel(proposer_model), output_type=Draft)
    critic: Agent[None, Critique] = Agent(FunctionModel(critic_model), output_type=Critique)
    eng = Engine(**kwargs)
    eng.register(
        agent_suggestor(
            proposer, name="proposer", reads=["task", "critique"], writes="draft", price=PRICE
        ),
        agent_suggestor(critic, name="critic", reads=["draft"], writes="critique", price=PRICE),
    )
    return eng


class Accepted:
    id = "accepted"
    required = True

    def evaluate(self, ctx: Context) -> CriterionResult:
        if any(f.content["verdict"] == "accept" for f in ctx.get("critique")):
            return Met()
        return Unmet("no draft accepted yet")


def test_a_proposer_and_a_critic_that_disagree_then_agree_meet_the_criterion() -> None:
    eng = disagreeing_pair(critic_accepts_at=2, criteria=[Accepted()], budget=Budget(max_cycles=10))
    result = eng.run({"task": ["write the answer"]})
    assert result.stop_reason == CriteriaMet(criteria=["accepted"])
    drafts = result.context.get("draft")
    assert [f.content["version"] for f in drafts] == [1, 2]
    critiques = result.context.get("critique")
    assert [c.content["verdict"] for c in critiques] == ["reject", "accept"]
    assert critiques[-1].confidence == 0.9
    assert critiques[-1].provenance.parents == tuple(d.id for d in drafts)


def test_a_proposer_and_a_critic_that_never_agree_are_caught_by_loop_detection() -> None:
    eng = disagreeing_pair(
        critic_accepts_at=None,
        criteria=[Accepted()],
        budget=Budget(max_cycles=50),
        stop_policies=policies_from_specs([{"type": "loop_detection", "window": 2}]),
    )
    result = eng.run({"task": ["write the answer"]})
    assert isinstance(result.stop_reason, LoopDetected)
    assert result.stop_reason.pattern == ["proposer", "critic"]
    assert result.cycles < 10


def test_loop_detection_catches_an_agent_repeating_itself() -> None:
    script = Writer(tool_calls=0)
    eng = writer_engine(
        script,
        Budget(max_cycles=50),
        stop_policies=policies_from_specs([{"type": "loop_detection", "window": 2}]),
    )
    result = eng.run({"topic": ["licenses"]})
    assert isinstance(result.stop_reason, LoopDetected)
    assert script.runs == 4


# -- cancellation ----------------------------------------------------------------------------------
def hanging_engine(started: asyncio.Event, **kwargs: Any) -> Engine:
    async def hang(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return await never_answers(started)

    @suggestor(name="quick", dependencies=["topic"])
    def quick(ctx: Context) -> list[Proposal]:
        return [Proposal("note", "written before the agent was cut")]

    eng = Engine(**kwargs)
    agent: Agent[None, str] = Agent(FunctionModel(hang))
    eng.register(agent_suggestor(agent, name="slow", reads=["topic"], writes="out"), quick)
    return eng


def test_a_cancel_cuts_an_agent_in_flight_and_keeps_the_facts() -> None:
    started = asyncio.Event()
    result = cancelled_once_started(hanging_engine(started), started, {"topic": ["t"]}, "cancel-me")
    assert isinstance(result.stop_reason, UserCancelled)
    assert [f.content for f in result.context.get("note")] == ["written before the agent was cut"]


def test_the_time_budget_cuts_an_agent_in_flight() -> None:
    started = asyncio.Event()
    eng = hanging_engine(started, budget=Budget(max_seconds=0.05))
    result = eng.run({"topic": ["t"]})
    assert started.is_set()
    assert isinstance(result.stop_reason, TimeBudgetExhausted)
    assert result.context.count("note") == 1
