"""The converge side of the workloads W1-W3 (docs/performance.md).

Each ``build_*`` returns a *prepare* callable: it builds a fresh
:class:`engine.Engine` with its suggestors registered (not timed) and returns the
thunk that performs one complete run and returns the :class:`engine.RunResult`
(timed). Suggestor bodies are trivial on
purpose: what is measured is the engine's own cost.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine import Budget, Engine, Proposal, RunResult, RunStore, suggestor
from engine.context import Context
from engine.suggestor import FunctionSuggestor

W2_SUGGESTORS = 100
W2_FACTS_PER_EXECUTION = 100
W2_CYCLES = 10


# -- W1 chain --------------------------------------------------------------------
def chain_suggestors(k: int) -> list[FunctionSuggestor]:
    """``k`` suggestors; suggestor ``i`` (1..k) reads ``k{i-1}`` and proposes ``k{i}``."""

    def make(i: int) -> FunctionSuggestor:
        out_key = f"k{i}"

        def step(ctx: Context) -> list[Proposal]:
            return [Proposal(out_key, i)]

        return FunctionSuggestor(step, f"s{i}", (f"k{i - 1}",))

    return [make(i) for i in range(1, k + 1)]


def build_chain(k: int) -> Callable[[], Callable[[], RunResult]]:
    """W1: one run of a chain of ``k`` suggestors (k invocations, k + 1 cycles)."""
    suggestors = chain_suggestors(k)
    budget = Budget(max_cycles=k + 2, max_facts=0)

    def prepare() -> Callable[[], RunResult]:
        engine = Engine(budget=budget)
        engine.register(*suggestors)

        def run() -> RunResult:
            result = engine.run({"k0": [0]})
            assert result.stop_reason.kind == "converged", result.stop_reason
            assert len(result.context) == k + 1
            return result

        return run

    return prepare


def chain_body_seconds(k: int) -> Callable[[], None]:
    """The W1 suggestor bodies alone (no engine), to subtract from the run time."""
    suggestors = chain_suggestors(k)
    ctx = Context()

    def run() -> None:
        for s in suggestors:
            s.execute(ctx)

    return run


# -- W2 throughput ---------------------------------------------------------------
def throughput_suggestors(
    workers: int = W2_SUGGESTORS,
    facts: int = W2_FACTS_PER_EXECUTION,
    cycles: int = W2_CYCLES,
) -> list[FunctionSuggestor]:
    """A driver advancing ``tick`` for ``cycles`` cycles and ``workers`` suggestors on it.

    Every cycle each worker is woken by the new tick and proposes ``facts``
    distinct facts on its own key (content: ``cycle * facts + n``).
    """

    @suggestor(name="driver", dependencies=["tick"])
    def driver(ctx: Context) -> list[Proposal]:
        # the tick written in cycle c wakes every worker in cycle c + 1
        return [Proposal("tick", ctx.cycle)] if ctx.cycle < cycles else []

    def make(j: int) -> FunctionSuggestor:
        key = f"w{j}"
        span = range(facts)

        def work(ctx: Context) -> list[Proposal]:
            base = ctx.cycle * facts
            return [Proposal(key, base + n) for n in span]

        return FunctionSuggestor(work, key, ("tick",))

    return [driver, *(make(j) for j in range(workers))]


def build_throughput(
    store_factory: Callable[[], RunStore] | None = None,
    workers: int = W2_SUGGESTORS,
    facts: int = W2_FACTS_PER_EXECUTION,
    cycles: int = W2_CYCLES,
) -> Callable[[], Callable[[], RunResult]]:
    """W2: one run of ``workers x facts x cycles`` distinct facts (optionally audited)."""
    suggestors = throughput_suggestors(workers, facts, cycles)
    budget = Budget(max_cycles=cycles + 5, max_facts=0)
    expected = workers * facts * cycles

    def prepare() -> Callable[[], RunResult]:
        store = store_factory() if store_factory is not None else None
        engine = Engine(budget=budget, store=store)
        engine.register(*suggestors)

        def run() -> RunResult:
            result = engine.run({"tick": [0]})
            assert result.stop_reason.kind == "converged", result.stop_reason
            produced = len(result.context) - cycles  # minus the ticks
            assert produced == expected, (produced, expected)
            return result

        return run

    return prepare


# -- W3 wide-idle ----------------------------------------------------------------
def wide_idle_suggestors(n: int) -> list[FunctionSuggestor]:
    """A dependency-free driver writing one fact per cycle to ``s{c mod n}``, n subscribers."""

    @suggestor(name="driver")
    def driver(ctx: Context) -> list[Proposal]:
        c = ctx.cycle
        return [Proposal(f"s{c % n}", c)]

    def make(i: int) -> FunctionSuggestor:
        def idle(ctx: Context) -> None:
            return None

        return FunctionSuggestor(idle, f"sub{i}", (f"s{i}",))

    return [driver, *(make(i) for i in range(n))]


def build_wide_idle(n: int, cycles: int) -> Callable[[], Callable[[], RunResult]]:
    """W3: ``cycles`` cycles over ``n`` idle subscribers; exactly one wakes per cycle."""
    suggestors = wide_idle_suggestors(n)
    budget = Budget(max_cycles=cycles, max_facts=0)

    def prepare() -> Callable[[], RunResult]:
        engine = Engine(budget=budget)
        engine.register(*suggestors)

        def run() -> RunResult:
            result = engine.run()
            assert result.stop_reason.kind == "cycle_budget_exhausted", result.stop_reason
            assert result.cycles == cycles
            return result

        return run

    return prepare


def describe(result: Any) -> str:
    """One line about a run, for sanity output."""
    return f"{result.stop_reason.kind}, {result.cycles} cycles, {len(result.context)} facts"
