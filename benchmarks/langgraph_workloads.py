"""The same workloads written idiomatically in LangGraph, for the comparison columns.

Only imported when ``langgraph`` is importable (``pip install -e ".[bench]"``).
One node per suggestor; facts are appended to the state through an
``operator.add`` reducer, the way LangGraph accumulates messages.
W1: a linear chain of K nodes. W2: a driver fanning out to 100 nodes per
superstep, each appending 100 facts. W3: a driver routing with
``Command(goto=...)`` to the one subscriber whose key it wrote.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import Command

Fact = tuple[str, int]


class FactsState(TypedDict):
    """State of W1 and W3: the facts so far and the driver's tick."""

    facts: Annotated[list[Fact], operator.add]
    tick: int


def build_chain(k: int) -> Callable[[], Callable[[], object]]:
    """W1: nodes ``s1``…``sk`` in a line; node i appends one fact on ``k{i}``."""

    def make(i: int) -> Any:
        key = f"k{i}"

        def node(state: FactsState) -> dict[str, Any]:
            return {"facts": [(key, i)]}

        return node

    graph = StateGraph(FactsState)
    for i in range(1, k + 1):
        graph.add_node(f"s{i}", make(i))
    graph.add_edge(START, "s1")
    for i in range(1, k):
        graph.add_edge(f"s{i}", f"s{i + 1}")
    graph.add_edge(f"s{k}", END)
    app = graph.compile()
    config: Any = {"recursion_limit": k + 10}

    def prepare() -> Callable[[], object]:
        def run() -> object:
            out = app.invoke({"facts": [("k0", 0)], "tick": 0}, config)
            assert len(out["facts"]) == k + 1
            return out

        return run

    return prepare


def fan_out_graph(state: type, nodes: list[Any], cycles: int, *, prefix: str) -> Any:
    """A compiled graph whose ``driver`` node counts ``tick`` and fans out to every
    node of ``nodes`` (named ``PREFIX0``, ``PREFIX1``...) while ``tick <= cycles``;
    each node leads back to the driver. ``state`` is the graph's state (a
    ``TypedDict`` with an int ``tick``)."""
    names = [f"{prefix}{j}" for j in range(len(nodes))]

    def driver(state: Any) -> dict[str, Any]:
        return {"tick": state["tick"] + 1}

    def route(state: Any) -> list[str] | str:
        return list(names) if state["tick"] <= cycles else END

    graph: Any = StateGraph(state)
    graph.add_node("driver", driver)
    for name, node in zip(names, nodes, strict=True):
        graph.add_node(name, node)
        graph.add_edge(name, "driver")
    graph.add_edge(START, "driver")
    graph.add_conditional_edges("driver", route, [*names, END])
    return graph.compile()


def build_throughput(
    workers: int = 100, facts: int = 100, cycles: int = 10
) -> Callable[[], Callable[[], object]]:
    """W2: a driver node fans out to ``workers`` nodes for ``cycles`` supersteps."""

    def make(j: int) -> Any:
        key = f"w{j}"
        span = range(facts)

        def work(state: FactsState) -> dict[str, Any]:
            base = state["tick"] * facts
            return {"facts": [(key, base + n) for n in span]}

        return work

    app = fan_out_graph(FactsState, [make(j) for j in range(workers)], cycles, prefix="w")
    config: Any = {"recursion_limit": 2 * cycles + 10}

    def prepare() -> Callable[[], object]:
        def run() -> object:
            out = app.invoke({"facts": [], "tick": 0}, config)
            assert len(out["facts"]) == workers * facts * cycles, len(out["facts"])
            return out

        return run

    return prepare


def build_wide_idle(n: int, cycles: int) -> Callable[[], Callable[[], object]]:
    """W3: the driver writes one fact and routes to its one subscriber; ``cycles`` rounds."""

    def driver(state: FactsState) -> Command[str]:
        c = state["tick"]
        if c >= cycles:
            return Command(goto=END)
        return Command(update={"facts": [(f"s{c % n}", c)], "tick": c + 1}, goto=f"sub{c % n}")

    def idle(state: FactsState) -> dict[str, Any]:
        return {}

    graph = StateGraph(FactsState)
    graph.add_node("driver", driver, destinations=(*(f"sub{i}" for i in range(n)), END))
    for i in range(n):
        graph.add_node(f"sub{i}", idle)
        graph.add_edge(f"sub{i}", "driver")
    graph.add_edge(START, "driver")
    app = graph.compile()
    config: Any = {"recursion_limit": 2 * cycles + 10}

    def prepare() -> Callable[[], object]:
        def run() -> object:
            out = app.invoke({"facts": [], "tick": 0}, config)
            assert len(out["facts"]) == cycles
            return out

        return run

    return prepare
