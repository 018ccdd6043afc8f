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

And the real thing: the wall time of one converge agent call (a structured
license review of the MIT text, ``LOCAL_CALLS`` calls one after the other, the
median) on the packaged local model (extra ``local``: Gemma 3 270M behind
llama-cpp-python's server on 127.0.0.1).

``python -m benchmarks --only w4`` (needs the ``agents`` extra; LangGraph and the
``local`` extra optional).
"""

from __future__ import annotations

import asyncio
import gc
import operator
import statistics
import time
from collections.abc import Callable
from typing import Annotated, Any, TypedDict

from benchmarks.harness import Prepare, Row, Series, Stat
from benchmarks.session import Suite, log

N_AGENTS = 200
CYCLES = 5
LATENCY_S = 0.020
TARGET_PERCENT = 5.0  # docs/performance.md: overhead <= 5% of the ideal wall time
LOCAL_CALLS = 20


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
    from benchmarks.langgraph_workloads import fan_out_graph

    agents = _agents(n, latency_s)

    def make(j: int) -> Any:
        agent = agents[j]

        async def node(state: _FanState) -> dict[str, Any]:
            result = await agent.run(f"tick {state['tick']}")
            return {"answers": [result.output]}

        return node

    app = fan_out_graph(_FanState, [make(j) for j in range(n)], cycles, prefix="a")
    config: Any = {"recursion_limit": 2 * cycles + 10, "max_concurrency": n}

    def prepare() -> Callable[[], object]:
        def run() -> object:
            out = asyncio.run(app.ainvoke({"answers": [], "tick": 0}, config))
            assert len(out["answers"]) == n * cycles, len(out["answers"])
            return out

        return run

    return prepare


class ModelUnavailable(Exception):
    """The local model cannot be measured: the message says why."""


def local_model_call_times(calls: int = LOCAL_CALLS) -> list[float]:
    """Wall times (seconds) of ``calls`` converge runs, each one agent call on the
    packaged local model (after one warm-up call). Raises :class:`ModelUnavailable`
    when a call gets no answer (the server died, cannot be reached, refused the
    model), ``ConfigurationError`` without the ``local`` extra,
    :class:`~converge.errors.ModelServerDied` when the server exits before it answers."""
    from pathlib import Path

    from converge.agents import build_agent
    from converge.agents.local import LOCAL_MODEL_SETTINGS, local_server
    from engine import Budget, Engine
    from examples.dependency_audit.reviewer import INSTRUCTIONS, LicenseVerdict

    vendor = Path(__file__).resolve().parents[1] / "examples/dependency_audit/vendor"
    text = (vendor / "legacy-left-pad" / "LICENSE").read_text()
    times: list[float] = []
    with local_server(0) as server:
        agent = build_agent(
            name="license_reviewer",
            model=f"openai:{server.alias}",
            base_url=server.base_url,
            instructions=INSTRUCTIONS,
            reads=["license.file"],
            writes="license",
            output=LicenseVerdict,
            model_settings=dict(LOCAL_MODEL_SETTINGS),
        )
        for i in range(calls + 1):
            engine = Engine(budget=Budget(max_cycles=1))
            engine.register(agent)
            start = time.perf_counter()
            result = engine.run({"license.file": [{"name": f"left-pad-{i}", "text": text}]})
            elapsed = time.perf_counter() - start
            if result.usage.output_tokens == 0:  # no answer at all
                if server.exit_status() is not None:
                    raise ModelUnavailable(_died(server.died()))
                raise ModelUnavailable(str(getattr(result.stop_reason, "message", "no answer")))
            if i:  # the first call warms the server's caches
                times.append(elapsed)
    return times


def _died(exc: Any) -> str:
    """A :class:`~converge.errors.ModelServerDied` in a line: how, and its log file."""
    return f"model server died: {exc.why} (its log: {exc.log_path})"


def run_w4_local(suite: Suite) -> None:
    """The W4 row of the real local model: its per-call time, or a row saying why
    the model is unavailable (skipped without the ``local`` extra)."""
    from converge.errors import ModelServerDied
    from engine import ConfigurationError

    label = "W4 local model call"
    size = f"Gemma 3 270M Q4_K_M, {LOCAL_CALLS} calls"
    try:
        times = local_model_call_times()
    except (ImportError, ConfigurationError) as exc:
        suite.rows.append(Row(label, size, "ms/call", False, None, note=f"skipped: {exc}"))
        log(f"  W4 local model: skipped: {exc}")
        return
    except Exception as exc:  # a model that cannot be measured must not lose the others
        if isinstance(exc, ModelServerDied):
            reason = _died(exc)
        elif isinstance(exc, ModelUnavailable):
            reason = str(exc)
        else:
            reason = f"{type(exc).__name__}: {exc}"
        suite.rows.append(
            Row(label, size, "ms/call", False, None, note=f"model unavailable: {reason}")
        )
        log(f"  W4 local model: model unavailable: {reason}")
        return
    series = Series(tuple(times), 1)
    note = "wall time of one structured agent call on llama-cpp-python's server, 127.0.0.1"
    suite.add(
        Row(label, size, "ms/call", False, Stat.of(series, lambda t: t * 1000), note=note), series
    )


def interleaved(prepares: list[Prepare], runs: int) -> list[Series]:
    """Time each of ``prepares`` ``runs`` times, round-robin (one run of each in
    turn, after one warm-up of each), so that the load of a shared machine falls
    on all of them alike; a full collection before each timed run."""
    for prepare in prepares:
        prepare()()
    times: list[list[float]] = [[] for _ in prepares]
    for _ in range(runs):
        for i, prepare in enumerate(prepares):
            thunk = prepare()
            gc.collect()
            t0 = time.perf_counter()
            thunk()
            times[i].append(time.perf_counter() - t0)
    return [Series(tuple(t), 1) for t in times]


def run_w4(suite: Suite) -> None:
    """The W4 rows of ``python -m benchmarks``: converge, raw pydantic-ai and
    LangGraph measured interleaved (:func:`interleaved`, twice the suite's runs)."""
    calls = N_AGENTS * CYCLES
    ideal = CYCLES * LATENCY_S
    label = "W4 agent fan-out"
    size = f"{N_AGENTS} agents x {CYCLES} cycles, {LATENCY_S * 1000:.0f} ms"
    try:
        prepares = [build_agent_fanout(), build_raw_fanout()]
    except ImportError as exc:
        suite.rows.append(Row(label, size, "µs/call", False, None, note=f"skipped: {exc}"))
        log(f"  W4: skipped: {exc}")
        return
    if suite.langgraph is not None:
        try:
            prepares.append(build_langgraph_fanout())
        except Exception as exc:  # a LangGraph API change must not lose our own figures
            log(f"  LangGraph failed: {type(exc).__name__}: {exc}")
    measured = interleaved(prepares, 2 * suite.sizes.runs)
    series, raw = measured[0], measured[1]
    lg = measured[2] if len(measured) > 2 else None

    def overhead(t: float) -> float:
        return (t - ideal) / calls * 1e6

    percent = 100 * (series.median - ideal) / ideal
    raw_percent = 100 * (raw.median - ideal) / ideal
    row = Row(
        label,
        size,
        "µs/call over ideal",
        False,
        Stat.of(series, overhead),
        target=("<=", TARGET_PERCENT / 100 * ideal / calls * 1e6),
        langgraph=None if lg is None else Stat.of(lg, overhead),
        limit=Stat.of(raw, overhead),
        limit_name="pydantic-ai Agent.run x gather, no engine",
        note=(
            f"ideal {ideal * 1000:.0f} ms; wall {series.median * 1000:.0f} ms = "
            f"+{percent:.0f}% of the ideal (raw pydantic-ai: +{raw_percent:.0f}%)"
            + ("" if lg is None else f"; LangGraph wall {lg.median * 1000:.0f} ms")
            + "; the three interleaved"
        ),
    )
    suite.add(row, series)
    if lg is not None:
        suite.add(adapter_row(series, raw, lg, size), series)
    run_w4_local(suite)


def adapter_row(ours: Series, raw: Series, lg: Series, size: str) -> Row:
    """What converge adds per call on top of raw pydantic-ai, against what LangGraph
    adds (the target: at most LangGraph's): the median over the interleaved rounds
    of each round's wall time minus the raw one's, per call (µs)."""
    calls = N_AGENTS * CYCLES

    def added(series: Series) -> Stat:
        diffs = [(t - r) / calls * 1e6 for t, r in zip(series.times, raw.times, strict=True)]
        return Stat(statistics.median(diffs), min(diffs), max(diffs))

    mine, theirs = added(ours), added(lg)
    return Row(
        "W4 cost over raw pydantic-ai",
        size,
        "µs/call added",
        False,
        mine,
        target=("<=", theirs.median),
        langgraph=theirs,
        note="per round: wall minus raw pydantic-ai's wall, per call; target: at most LangGraph's",
    )
