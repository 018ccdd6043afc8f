"""Budgets stop a run at their exact boundary, and 0 / None disable them (DESIGN.md §3, §4)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from freezegun import freeze_time

from engine import (
    Budget,
    Context,
    Converged,
    CostBudgetExhausted,
    CycleBudgetExhausted,
    Effect,
    Engine,
    FactBudgetExhausted,
    InvocationBudgetExhausted,
    Proposal,
    TimeBudgetExhausted,
    TokenBudgetExhausted,
    Usage,
)
from engine.effect import NO_USAGE
from tests.stopfixtures import FakeClock


class Counter:
    """Reads ``n``, proposes the next integer until ``upto``; one new fact per cycle."""

    def __init__(
        self,
        name: str = "count",
        *,
        upto: int = 1000,
        per_cycle: int = 1,
        usage: Usage = NO_USAGE,
        on_execute: Callable[[], None] | None = None,
    ) -> None:
        self.name = name
        self.dependencies = frozenset({"n"})
        self.upto = upto
        self.per_cycle = per_cycle
        self.usage = usage
        self.on_execute = on_execute
        self.executions = 0

    def accepts(self, ctx: Context) -> bool:
        return True

    def execute(self, ctx: Context) -> Effect:
        self.executions += 1
        if self.on_execute is not None:
            self.on_execute()
        top = max(f.content for f in ctx.get("n"))
        props = [
            Proposal("n", top + k) for k in range(1, self.per_cycle + 1) if top + k <= self.upto
        ]
        return Effect(props, self.usage)


def _run(budget: Budget, *suggestors: Any, clock: FakeClock | None = None) -> Any:
    engine = Engine(budget=budget, clock=clock)
    engine.register(*(suggestors or (Counter(),)))
    return engine.run({"n": [0]})


def test_cycle_budget_stops_after_exactly_max_cycles_cycles() -> None:
    counter = Counter()
    r = _run(Budget(max_cycles=3), counter)
    assert r.stop_reason == CycleBudgetExhausted(cycles_executed=3, limit=3)
    assert r.cycles == 3 and counter.executions == 3
    assert [f.content for f in r.context.get("n")] == [0, 1, 2, 3]
    assert r.stop_reason.exit_code == 3 and r.stop_reason.is_resumable()


def test_a_job_that_needs_exactly_max_cycles_cycles_converges() -> None:
    r = _run(Budget(max_cycles=3), Counter(upto=3))
    # cycle 4 would start (n changed in cycle 3) but is never run: the budget stops first
    assert isinstance(r.stop_reason, CycleBudgetExhausted)

    from engine import suggestor

    @suggestor(name="a", dependencies=["x"])
    def a(ctx: Context) -> list[Proposal]:
        return [Proposal("y", 1)]

    @suggestor(name="b", dependencies=["y"])
    def b(ctx: Context) -> list[Proposal]:
        return [Proposal("z", 1)]

    @suggestor(name="c", dependencies=["z"])
    def c(ctx: Context) -> list[Proposal]:
        return [Proposal("done", 1)]

    engine = Engine(budget=Budget(max_cycles=3))
    engine.register(a, b, c)
    r = engine.run({"x": [0]})
    assert r.stop_reason == Converged() and r.cycles == 3


def test_fact_budget_stops_once_the_count_exceeds_max_facts() -> None:
    counter = Counter()
    r = _run(Budget(max_facts=5), counter)
    # 1 input fact + 1 per cycle: 5 facts after cycle 4 go on, 6 after cycle 5 stop
    assert r.stop_reason == FactBudgetExhausted(facts_count=6, limit=5)
    assert r.cycles == 5 and len(r.context) == 6


def test_fact_budget_reports_the_real_count_when_a_cycle_overshoots() -> None:
    r = _run(Budget(max_facts=5), Counter(per_cycle=3))
    assert r.stop_reason == FactBudgetExhausted(facts_count=7, limit=5)
    assert len(r.context) == 7


def test_token_budget_stops_once_input_plus_output_tokens_exceed_the_limit() -> None:
    usage = Usage(input_tokens=30, output_tokens=10)
    r = _run(Budget(max_tokens=100), Counter(usage=usage))
    assert r.stop_reason == TokenBudgetExhausted(tokens_consumed=120, limit=100)
    assert r.cycles == 3 and r.usage == Usage(90, 30, 0.0)


def test_token_budget_is_not_exhausted_by_using_exactly_the_limit() -> None:
    usage = Usage(input_tokens=30, output_tokens=10)
    r = _run(Budget(max_tokens=120), Counter(usage=usage))
    assert r.stop_reason == TokenBudgetExhausted(tokens_consumed=160, limit=120)
    assert r.cycles == 4


def test_cost_budget_stops_once_the_usd_spent_exceeds_the_limit() -> None:
    r = _run(Budget(max_cost_usd=0.5), Counter(usage=Usage(cost_usd=0.25)))
    assert r.stop_reason == CostBudgetExhausted(cost_usd=0.75, limit_usd=0.5)
    assert r.cycles == 3


def test_invocation_budget_is_never_exceeded() -> None:
    counter = Counter()
    r = _run(Budget(max_invocations=4), counter)
    assert counter.executions == 4
    assert r.stop_reason == InvocationBudgetExhausted(invocations=4, limit=4)
    assert r.budget_status.dimensions["invocations"].used == 4
    assert [f.content for f in r.context.get("n")] == [0, 1, 2, 3, 4]


def test_per_suggestor_invocation_budget_is_never_exceeded() -> None:
    limited = Counter("limited")
    free = Counter("free", usage=Usage())
    engine = Engine(budget=Budget(per_suggestor={"limited": 2}))
    engine.register(free, limited)
    r = engine.run({"n": [0]})
    assert limited.executions == 2
    assert r.stop_reason == InvocationBudgetExhausted(invocations=2, limit=2, suggestor="limited")
    status = r.budget_status.dimensions["suggestor:limited"]
    assert (status.used, status.limit, status.percent) == (2, 2, 100.0)


def test_time_budget_stops_before_the_next_cycle_with_an_injected_clock() -> None:
    clock = FakeClock()

    def tick() -> None:
        clock.now += 1.0

    counter = Counter(on_execute=tick)
    r = _run(Budget(max_seconds=2.5), counter, clock=clock)
    assert r.stop_reason == TimeBudgetExhausted(duration_ms=3000, limit_ms=2500)
    assert r.cycles == 3 and counter.executions == 3
    assert r.duration_ms == 3000


def test_time_budget_is_not_exhausted_by_using_exactly_the_limit() -> None:
    clock = FakeClock()

    def tick() -> None:
        clock.now += 1.0

    r = _run(Budget(max_seconds=3), Counter(upto=5, on_execute=tick), clock=clock)
    assert r.stop_reason == TimeBudgetExhausted(duration_ms=4000, limit_ms=3000)
    assert r.cycles == 4


def test_time_budget_works_with_freezegun_for_a_sync_run() -> None:
    with freeze_time("2026-01-01 00:00:00") as frozen:
        counter = Counter(on_execute=lambda: frozen.tick(1.0))
        engine = Engine(budget=Budget(max_seconds=2.5))
        engine.register(counter)
        r = engine.run({"n": [0]})
    assert r.stop_reason == TimeBudgetExhausted(duration_ms=3000, limit_ms=2500)
    assert counter.executions == 3


_DIMENSIONS: list[tuple[str, Callable[[], Counter]]] = [
    ("max_cycles", lambda: Counter(upto=120)),
    ("max_facts", lambda: Counter(upto=30)),
    ("max_tokens", lambda: Counter(upto=30, usage=Usage(50, 50))),
    ("max_cost_usd", lambda: Counter(upto=30, usage=Usage(cost_usd=1.0))),
    ("max_invocations", lambda: Counter(upto=30)),
    ("max_seconds", lambda: Counter(upto=30)),
]


@pytest.mark.parametrize("disabled", [0, None])
@pytest.mark.parametrize(("field", "make"), _DIMENSIONS, ids=[d[0] for d in _DIMENSIONS])
def test_zero_and_none_disable_a_budget_dimension(
    field: str, make: Callable[[], Counter], disabled: int | None
) -> None:
    clock = FakeClock()
    counter = make()
    counter.on_execute = lambda: setattr(clock, "now", clock.now + 100.0)
    r = _run(Budget(**{field: disabled}), counter, clock=clock)
    assert r.stop_reason == Converged()
    assert r.context.count("n") == counter.upto + 1
    dim = {
        "max_cycles": "cycles",
        "max_facts": "facts",
        "max_tokens": "tokens",
        "max_cost_usd": "cost_usd",
        "max_invocations": "invocations",
        "max_seconds": "seconds",
    }[field]
    assert r.budget_status.dimensions[dim].limit is None
    assert r.budget_status.dimensions[dim].percent is None


def test_the_same_budgets_set_small_do_stop_the_same_jobs() -> None:
    # the counterpart of the test above: each of these limits does bite
    for field, make in _DIMENSIONS:
        clock = FakeClock()
        counter = make()
        counter.on_execute = lambda c=clock: setattr(c, "now", c.now + 100.0)  # type: ignore[misc]
        r = _run(Budget(**{field: 5}), counter, clock=clock)
        assert r.stop_reason.is_budget_exhausted(), (field, r.stop_reason)


def test_budget_status_reports_used_limit_and_percent_per_dimension_and_the_max_overall() -> None:
    clock = FakeClock()

    def tick() -> None:
        clock.now += 0.5

    budget = Budget(
        max_cycles=10,
        max_facts=20,
        max_tokens=1000,
        max_seconds=10,
        max_cost_usd=2.0,
        max_invocations=8,
        per_suggestor={"count": 5},
    )
    r = _run(budget, Counter(upto=4, usage=Usage(100, 50, 0.25), on_execute=tick), clock=clock)
    assert r.stop_reason == Converged()
    dims = r.budget_status.dimensions
    # 5 executions (the 5th proposes nothing), 5 cycles, 5 facts
    expected = {
        "cycles": (5, 10, 50.0),
        "facts": (5, 20, 25.0),
        "tokens": (750, 1000, 75.0),
        "seconds": (2.5, 10, 25.0),
        "cost_usd": (1.25, 2.0, 62.5),
        "invocations": (5, 8, 62.5),
        "suggestor:count": (5, 5, 100.0),
    }
    for name, (used, limit, percent) in expected.items():
        d = dims[name]
        assert (d.used, d.limit, d.percent) == (used, limit, percent), name
    assert r.budget_status.percent == 100.0
    assert "cycles 5/10 (50.0%)" in r.budget_status.summary()


def test_overall_budget_percent_is_the_maximum_over_limited_dimensions() -> None:
    r = _run(Budget(max_cycles=10, max_facts=None), Counter(upto=2))
    assert r.budget_status.percent == r.budget_status.dimensions["cycles"].percent == 30.0
    unlimited = _run(Budget.unlimited(), Counter(upto=2))
    assert unlimited.budget_status.percent == 0.0


def test_when_several_conditions_fire_at_one_check_all_are_signals_most_urgent_first() -> None:
    from criteria import invariant
    from engine import InvariantClass, InvariantViolated

    @invariant(name="few", invariant_class="semantic")
    def few(ctx: Context) -> bool:
        return ctx.count("n") < 3

    engine = Engine(budget=Budget(max_facts=2, max_tokens=10), invariants=[few])
    engine.register(Counter(usage=Usage(20, 0)))
    r = engine.run({"n": [0, 1]})
    violated = InvariantViolated(
        invariant_class=InvariantClass.SEMANTIC, name="few", reason="few does not hold"
    )
    assert r.signals == (
        violated,
        FactBudgetExhausted(facts_count=3, limit=2),
        TokenBudgetExhausted(tokens_consumed=20, limit=10),
    )
    assert r.stop_reason == violated
    assert "Signals (most urgent first):" in r.explain()
