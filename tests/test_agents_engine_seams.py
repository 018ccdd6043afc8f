"""The engine's general seams the agents rely on, shown with plain suggestors:
tool calls reported by an Effect count as invocations ``NAME.TOOL``, an Effect's
signal stops the run after the merge, its audit details reach the trail, and a
suggestor sees what is left of the run's budgets."""

from __future__ import annotations

from pathlib import Path

from audit import open_store
from engine import (
    Budget,
    Context,
    CostBudgetExhausted,
    Effect,
    Engine,
    Finished,
    InvocationBudgetExhausted,
    Proposal,
    RemainingBudget,
    Usage,
    suggestor,
)
from engine.policy import RunStats
from gates.policies import policies_from_specs


class StatsRecorder:
    """A stop policy that never stops: it keeps the last stats it saw."""

    id = "recorder"

    def __init__(self) -> None:
        self.last: RunStats | None = None

    def evaluate(self, stats: RunStats) -> None:
        self.last = stats


def _tool_user(tools: tuple[str, ...]) -> object:
    @suggestor(name="worker", dependencies=["task"])
    def worker(ctx: Context) -> Effect:
        return Effect([Proposal("done", ctx.get("task")[0].content)], tool_calls=tools)

    return worker


def test_tool_calls_reported_by_an_effect_count_as_invocations_named_after_the_tool() -> None:
    recorder = StatsRecorder()
    eng = Engine(budget=Budget(max_cycles=5), stop_policies=[recorder])
    eng.register(_tool_user(("search", "search", "fetch")))
    eng.run({"task": ["t1"]})
    stats = recorder.last
    assert stats is not None
    assert stats.invocations == 4
    assert stats.invocations_by_suggestor == {
        "worker": 1,
        "worker.search": 2,
        "worker.fetch": 1,
    }
    assert list(stats.invocation_history) == [
        "worker",
        "worker.search",
        "worker.search",
        "worker.fetch",
    ]


def test_stop_on_tool_fires_on_a_tool_reported_by_an_effect() -> None:
    eng = Engine(
        budget=Budget(max_cycles=5),
        stop_policies=policies_from_specs([{"type": "stop_on_tool", "tool_name": "worker.fetch"}]),
    )
    eng.register(_tool_user(("fetch",)))
    result = eng.run({"task": ["t1"]})
    assert isinstance(result.stop_reason, Finished)
    assert result.stop_reason.suggestor == "worker.fetch"


def test_a_tool_called_past_its_per_suggestor_limit_stops_the_run() -> None:
    @suggestor(name="looper")
    def looper(ctx: Context) -> Effect:
        return Effect([Proposal("n", len(ctx))], tool_calls=("search",))

    recorder = StatsRecorder()
    eng = Engine(
        budget=Budget(max_cycles=10, per_suggestor={"looper.search": 2}),
        stop_policies=[recorder],
    )
    eng.register(looper)
    seen: list[RemainingBudget | None] = []

    @suggestor(name="observer")
    def observer(ctx: Context) -> None:
        seen.append(ctx.remaining_budget())

    eng.register(observer)
    result = eng.run()
    left = [r.for_name("looper.search") for r in seen if r is not None]
    assert left == [2, 1, 0]
    assert result.stop_reason == InvocationBudgetExhausted(
        invocations=3, limit=2, suggestor="looper.search"
    )


def test_a_signal_on_an_effect_stops_the_run_after_its_proposals_are_merged() -> None:
    @suggestor(name="spender", dependencies=["task"])
    def spender(ctx: Context) -> Effect:
        return Effect(
            [Proposal("partial", "kept")],
            usage=Usage(0, 0, 0.5),
            signal=CostBudgetExhausted(cost_usd=0.5, limit_usd=0.25),
        )

    eng = Engine(budget=Budget(max_cycles=5))
    eng.register(spender)
    result = eng.run({"task": ["t"]})
    assert isinstance(result.stop_reason, CostBudgetExhausted)
    assert [f.content for f in result.context.get("partial")] == ["kept"]
    assert result.usage.cost_usd == 0.5


def test_audit_details_of_an_effect_and_its_tool_calls_reach_the_trail(tmp_path: Path) -> None:
    @suggestor(name="talker", dependencies=["task"])
    def talker(ctx: Context) -> Effect:
        return Effect(tool_calls=("lookup",), audit={"messages": [{"role": "user"}]})

    store = open_store(f"sqlite:///{tmp_path / 'a.db'}")
    eng = Engine(store=store)
    eng.register(talker)
    result = eng.run({"task": ["t"]})
    executed = [e.payload for e in store.events(result.run_id, ["suggestor_executed"])]
    assert executed[0]["messages"] == [{"role": "user"}]
    assert executed[0]["tool_calls"] == ["lookup"]


def test_a_suggestor_sees_what_is_left_of_tokens_cost_and_invocations() -> None:
    seen: list[RemainingBudget | None] = []

    @suggestor(name="spend")
    def spend(ctx: Context) -> Effect:
        seen.append(ctx.remaining_budget())
        return Effect([Proposal("n", ctx.cycle)], usage=Usage(30, 10, 0.25))

    eng = Engine(budget=Budget(max_cycles=3, max_tokens=1000, max_cost_usd=1.0, max_invocations=10))
    eng.register(spend)
    eng.run()
    budget = eng.budget
    assert seen[0] == RemainingBudget(tokens=1000, cost_usd=1.0, invocations=10, budget=budget)
    assert seen[1] == RemainingBudget(tokens=960, cost_usd=0.75, invocations=9, budget=budget)
    assert seen[2] is not None and seen[2].tokens == 920


def test_a_context_outside_a_run_has_no_remaining_budget() -> None:
    assert Context().remaining_budget() is None


def test_invocation_budget_counts_tool_calls_and_stops_before_exceeding() -> None:
    @suggestor(name="looper")
    def looper(ctx: Context) -> Effect:
        return Effect([Proposal("n", len(ctx))], tool_calls=("a", "b"))

    recorder = StatsRecorder()
    eng = Engine(budget=Budget(max_cycles=10, max_invocations=6), stop_policies=[recorder])
    eng.register(looper)
    result = eng.run()
    assert isinstance(result.stop_reason, InvocationBudgetExhausted)
    assert recorder.last is not None and recorder.last.invocations == 6
