"""W4 agent fan-out: N LLM agent suggestors on a model with an async latency.

Each of ``n`` agents (``converge.agents.agent_suggestor`` over pydantic-ai's
``FunctionModel`` whose function awaits ``latency_s``, then answers with exact
usage) reads the ``tick`` key; a plain ``ticker`` writes a new tick every cycle,
so every agent runs in each of ``cycles`` cycles, all concurrently. The ideal
wall time is ``cycles x latency_s``; the figure is the overhead per agent call
over it: ``(wall - ideal) / (n x cycles)``.

Beside it, measured in the same run:

- the raw limit: the same ``n x cycles`` pydantic-ai ``Agent.run`` calls with
  ``asyncio.gather`` and no engine (what pydantic-ai itself costs);
- LangGraph: a driver node fanning out to ``n`` async nodes that each await the
  same agent, for ``cycles`` supersteps.

``python -m benchmarks --only w4`` (needs the ``agents`` extra; LangGraph optional).
"""

from __future__ import annotations

import asyncio
import operator
from collections.abc import Callable
from typing import Annotated, Any, TypedDict

from benchmarks.harness import Prepare, Row, Stat
from benchmarks.session import Suite, log

N_AGENTS = 200
CYCLES = 5
LATENCY_S = 0.020
TARGET_PERCENT = 5.0  # docs/performance.md: overhead <= 5% of the ideal wall time


def _agents(n: int, latency_s: float) -> list[Any]:
    """``n`` pydantic-ai agents on a model that waits ``latency_s`` then answers."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import RequestUsage

    async def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        await asyncio.sleep(latency_s)
        return ModelResponse(
            parts=[TextPart(f"seen {len(messages)}")],
            usage=RequestUsage(input_tokens=50, output_tokens=5),
        )

    return [Agent(FunctionModel(answer, model_name="bench")) for _ in range(n)]


def build_agent_fanout(
    n: int = N_AGENTS, cycles: int = CYCLES, latency_s: float = LATENCY_S
) -> Prepare:
    """W4 in converge: one run of ``n`` agents for ``cycles`` cycles."""
    from converge.agents import agent_suggestor
    from engine import Budget, Context, CycleBudgetExhausted, Engine, Proposal, suggestor

    agents = _agents(n, latency_s)

    @suggestor(name="ticker")
    def ticker(ctx: Context) -> list[Proposal]:
        return [Proposal("tick", ctx.cycle)]

    suggestors = [ticker] + [
        agent_suggestor(a, name=f"agent{i}", reads=["tick"], writes=f"answer{i}", price=(1.0, 2.0))
        for i, a in enumerate(agents)
    ]

    def prepare() -> Callable[[], object]:
        engine = Engine(budget=Budget(max_cycles=cycles), max_concurrency=n)
        engine.register(*suggestors)

        def run() -> object:
            result = engine.run({"tick": [-1]})
            assert isinstance(result.stop_reason, CycleBudgetExhausted), result.stop_reason
            assert result.usage.input_tokens == 50 * n * cycles, result.usage
            return result

        return run

    return prepare


def build_raw_fanout(
    n: int = N_AGENTS, cycles: int = CYCLES, latency_s: float = LATENCY_S
) -> Prepare:
    """The raw limit: ``cycles`` rounds of ``n`` concurrent ``Agent.run`` calls, no engine."""
    agents = _agents(n, latency_s)

    async def rounds() -> None:
        for c in range(cycles):
            await asyncio.gather(*(a.run(f"tick {c}") for a in agents))

    def prepare() -> Callable[[], object]:
        return lambda: asyncio.run(rounds())

    return prepare


class _FanState(TypedDict):
    answers: Annotated[list[str], operator.add]
    tick: int


def build_langgraph_fanout(
    n: int = N_AGENTS, cycles: int = CYCLES, latency_s: float = LATENCY_S
) -> Prepare:
    """W4 in LangGraph: a driver fans out to ``n`` async agent nodes, ``cycles`` supersteps."""
    from langgraph.graph import END, START, StateGraph

    agents = _agents(n, latency_s)

    def driver(state: _FanState) -> dict[str, Any]:
        return {"tick": state["tick"] + 1}

    def route(state: _FanState) -> list[str] | str:
        return [f"a{j}" for j in range(n)] if state["tick"] <= cycles else END

    def make(j: int) -> Any:
        agent = agents[j]

        async def node(state: _FanState) -> dict[str, Any]:
            result = await agent.run(f"tick {state['tick']}")
            return {"answers": [result.output]}

        return node

    graph = StateGraph(_FanState)
    graph.add_node("driver", driver)
    for j in range(n):
        graph.add_node(f"a{j}", make(j))
        graph.add_edge(f"a{j}", "driver")
    graph.add_edge(START, "driver")
    graph.add_conditional_edges("driver", route, [*(f"a{j}" for j in range(n)), END])
    app = graph.compile()
    config: Any = {"recursion_limit": 2 * cycles + 10, "max_concurrency": n}

    def prepare() -> Callable[[], object]:
        def run() -> object:
            out = asyncio.run(app.ainvoke({"answers": [], "tick": 0}, config))
            assert len(out["answers"]) == n * cycles, len(out["answers"])
            return out

        return run

    return prepare


def run_w4(suite: Suite) -> None:
    """The W4 row of ``python -m benchmarks``."""
    calls = N_AGENTS * CYCLES
    ideal = CYCLES * LATENCY_S
    label = "W4 agent fan-out"
    size = f"{N_AGENTS} agents x {CYCLES} cycles, {LATENCY_S * 1000:.0f} ms"
    try:
        series = suite.time(build_agent_fanout())
    except ImportError as exc:
        suite.rows.append(Row(label, size, "µs/call", False, None, note=f"skipped: {exc}"))
        log(f"  W4: skipped: {exc}")
        return

    def overhead(t: float) -> float:
        return (t - ideal) / calls * 1e6

    raw = suite.time(build_raw_fanout())
    lg = None
    if suite.langgraph is not None:
        try:
            lg = suite.time(build_langgraph_fanout())
        except Exception as exc:  # a LangGraph API change must not lose our own figures
            log(f"  LangGraph failed: {type(exc).__name__}: {exc}")
    ours = Stat.of(series, overhead)
    percent = 100 * (series.median - ideal) / ideal
    raw_percent = 100 * (raw.median - ideal) / ideal
    row = Row(
        label,
        size,
        "µs/call over ideal",
        False,
        ours,
        target=("<=", TARGET_PERCENT / 100 * ideal / calls * 1e6),
        langgraph=None if lg is None else Stat.of(lg, overhead),
        limit=Stat.of(raw, overhead),
        limit_name="pydantic-ai Agent.run x gather, no engine",
        note=(
            f"ideal {ideal * 1000:.0f} ms; wall {series.median * 1000:.0f} ms = "
            f"+{percent:.0f}% of the ideal (raw pydantic-ai: +{raw_percent:.0f}%)"
            + ("" if lg is None else f"; LangGraph wall {lg.median * 1000:.0f} ms")
        ),
    )
    suite.add(row, series)
