"""Several stop conditions at one check, the ``on_stop`` continuation override,
``StopRun`` raised by a suggestor, and ``RunResult.explain()``."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from audit import open_store
from engine import (
    Budget,
    ConsecutiveErrorsExceeded,
    Context,
    Continue,
    Converged,
    CycleBudgetExhausted,
    Effect,
    Engine,
    FunctionSuggestor,
    InvariantViolated,
    InvocationBudgetExhausted,
    LoopDetected,
    PolicyStopped,
    Proposal,
    RunStats,
    StopReason,
    StopRequested,
    StopRun,
    TokenBudgetExhausted,
    Usage,
)
from engine.stop import parse_stop_reason
from gates.policies import StopDecision, policies_from_specs
from tests.test_resume_run import MemoryStore


def ticker(name: str = "tick", usage: Usage | None = None, upto: int | None = None) -> Any:
    """Dependency-free: a new number each cycle (up to ``upto`` facts, then nothing)."""

    def run(ctx: Context) -> Effect:
        n = ctx.count("n")
        if upto is not None and n >= upto:
            return Effect()
        return Effect([Proposal("n", n)], usage or Usage())

    return FunctionSuggestor(run, name)


class Always:
    """A custom policy that fires from cycle ``at`` on."""

    def __init__(self, policy_id: str, at: int = 1) -> None:
        self.id = policy_id
        self.at = at

    def evaluate(self, stats: RunStats) -> StopDecision | None:
        return StopDecision("always", f"cycle {stats.cycle}") if stats.cycle >= self.at else None


class OnStopSpy:
    """An ``on_stop`` override that records its calls and answers from a script."""

    def __init__(self, *answers: Continue | None) -> None:
        self.answers = list(answers)
        self.calls: list[list[str]] = []

    def __call__(self, signals: Sequence[StopReason], stats: RunStats) -> Continue | None:
        self.calls.append([s.kind_code() for s in signals])
        return self.answers.pop(0) if self.answers else None


# --- several conditions at one check --------------------------------------------------


def test_two_conditions_at_one_check_the_more_urgent_wins_and_both_are_signals() -> None:
    store = MemoryStore()
    policies = policies_from_specs(
        [
            {"type": "content_match", "pattern": "^2$"},  # policy category, priority 4
            {"type": "token_budget", "max_total": 25},  # budget category, priority 3
        ]
    )
    engine = Engine(stop_policies=policies, store=store)

    def numbers(ctx: Context) -> Effect:
        return Effect([Proposal("n", str(ctx.count("n")))], Usage(5, 5))

    result = engine.register(FunctionSuggestor(numbers, "numbers")).run(run_id="both")
    # cycle 3 promotes "2" and brings the tokens to 30 > 25: both fire at that check
    assert result.cycles == 3
    assert result.stop_reason == TokenBudgetExhausted(tokens_consumed=30, limit=25)
    assert [s.kind_code() for s in result.signals] == ["token_budget_exhausted", "policy_stopped"]
    assert isinstance(result.signals[1], PolicyStopped)
    recorded = [
        parse_stop_reason(e.payload) for e in store.events["both"] if e.kind == "stop_signal"
    ]
    assert recorded == list(result.signals)
    kinds = store.kinds("both")
    assert kinds[-3:] == ["stop_signal", "stop_signal", "run_stopped"]
    assert store.events["both"][-1].payload["kind"] == "token_budget_exhausted"


def test_an_error_streak_outranks_a_loop_detected_at_the_same_check() -> None:
    def flaky(ctx: Context) -> Effect:
        raise RuntimeError("down")

    policies = policies_from_specs(
        [{"type": "loop_detection", "window": 2}, {"type": "consecutive_errors", "max": 2}]
    )
    engine = Engine(stop_policies=policies, on_error="continue")
    result = engine.register(ticker(), FunctionSuggestor(flaky, "flaky")).run()
    assert result.cycles == 2
    assert isinstance(result.stop_reason, ConsecutiveErrorsExceeded)
    assert result.signals[1] == LoopDetected(window=2, pattern=["tick", "flaky"])


def test_conditions_of_equal_priority_keep_their_evaluation_order() -> None:
    engine = Engine(stop_policies=[Always("first", at=2), Always("second", at=2)])
    result = engine.register(ticker()).run()
    assert [s.policy_id for s in result.signals if isinstance(s, PolicyStopped)] == [
        "first",
        "second",
    ]
    assert result.stop_reason == PolicyStopped(policy_id="first", code="always", detail="cycle 2")


# --- the continuation override --------------------------------------------------------


def test_an_override_that_raises_the_budget_extends_it_once_and_the_run_finishes() -> None:
    store = MemoryStore()
    spy = OnStopSpy(Continue(budget=Budget(max_cycles=20), note="one more try"))
    engine = Engine(budget=Budget(max_cycles=3), on_stop=spy, store=store)
    result = engine.register(ticker(upto=6)).run(run_id="k")
    assert result.stop_reason == Converged()
    assert spy.calls == [["cycle_budget_exhausted"]]
    assert len(result.facts) == 6
    (record,) = result.continuations
    assert (record.cycle, record.signals, record.budget_raised) == (
        3,
        ("cycle_budget_exhausted",),
        True,
    )
    assert result.budget_status.dimensions["cycles"].limit == 20
    continued = [e for e in store.events["k"] if e.kind == "run_continued"]
    assert len(continued) == 1 and continued[0].payload["note"] == "one more try"


def test_a_naive_override_that_does_not_raise_the_budget_stops_on_the_next_check() -> None:
    spy = OnStopSpy(Continue(), Continue(), Continue())
    engine = Engine(budget=Budget(max_cycles=3), on_stop=spy)
    result = engine.register(ticker()).run()
    assert result.stop_reason == CycleBudgetExhausted(cycles_executed=4, limit=3)
    assert len(spy.calls) == 1  # the same condition firing again is not offered again
    assert [k.budget_raised for k in result.continuations] == [False]


def test_a_policy_stop_can_be_continued_once_then_it_stops_for_good() -> None:
    spy = OnStopSpy(Continue(note="look again"), Continue())
    engine = Engine(stop_policies=[Always("nag", at=2)], on_stop=spy)
    result = engine.register(ticker()).run()
    assert result.stop_reason == PolicyStopped(policy_id="nag", code="always", detail="cycle 3")
    assert spy.calls == [["policy_stopped"]]


def test_raising_a_budget_field_does_not_lift_a_budget_made_by_a_policy() -> None:
    # token_budget as a policy has its own limit: Budget.max_tokens cannot lift it
    spy = OnStopSpy(*[Continue(budget=Budget(max_tokens=10_000)) for _ in range(5)])
    policies = policies_from_specs([{"type": "token_budget", "max_total": 10}])
    engine = Engine(stop_policies=policies, on_stop=spy)
    result = engine.register(ticker(usage=Usage(4, 0))).run()
    assert result.stop_reason == TokenBudgetExhausted(tokens_consumed=16, limit=10)
    assert len(spy.calls) == 1 and result.cycles == 4


def test_a_raised_budget_may_be_raised_again_when_it_runs_out_again() -> None:
    spy = OnStopSpy(Continue(budget=Budget(max_cycles=4)), Continue(budget=Budget(max_cycles=6)))
    engine = Engine(budget=Budget(max_cycles=2), on_stop=spy)
    result = engine.register(ticker()).run()
    assert result.stop_reason == CycleBudgetExhausted(cycles_executed=6, limit=6)
    assert len(spy.calls) == 3 and len(result.continuations) == 2


def test_error_validation_and_success_stops_are_never_offered_to_the_override() -> None:
    def broken(ctx: Context) -> Effect:
        raise ValueError("bad input")

    spy = OnStopSpy(Continue(budget=Budget(max_cycles=100)))
    error = Engine(on_stop=spy).register(FunctionSuggestor(broken, "broken")).run()
    assert error.stop_reason.is_error()

    class NoMoreThanTwo:
        name = "no_more_than_two"
        invariant_class = "structural"

        def check(self, ctx: Context) -> Any:
            from engine import Violation

            return Violation("too many") if ctx.count("n") > 2 else None

    violated = Engine(invariants=[NoMoreThanTwo()], on_stop=spy).register(ticker()).run()
    assert isinstance(violated.stop_reason, InvariantViolated)
    done = Engine(on_stop=spy).register(ticker(upto=2)).run()
    assert done.stop_reason == Converged()
    assert spy.calls == []


def test_an_override_that_raises_is_ignored_and_the_run_stops() -> None:
    def explode(signals: Sequence[StopReason], stats: RunStats) -> Continue | None:
        raise RuntimeError("override bug")

    result = Engine(budget=Budget(max_cycles=2), on_stop=explode).register(ticker()).run()
    assert result.stop_reason == CycleBudgetExhausted(cycles_executed=2, limit=2)


# --- StopRun -------------------------------------------------------------------------


def test_stop_run_raised_by_a_suggestor_is_a_stop_requested_with_its_context() -> None:
    def judge(ctx: Context) -> list[Proposal]:
        if ctx.count("n") >= 3:
            raise StopRun("good enough", context={"seen": ctx.count("n")})
        return []

    engine = Engine().register(ticker(), FunctionSuggestor(judge, "judge"))
    result = engine.run()
    assert result.stop_reason == StopRequested(
        source="judge", message="good enough", context={"seen": 3}
    )
    assert result.stop_reason.is_cancelled() and result.stop_reason.is_success()
    assert result.stop_reason.exit_code == 130
    assert [f.content for f in result.facts] == [0, 1, 2, 3]  # the cycle's facts are kept


def test_stop_run_raised_by_an_async_suggestor_stops_the_run_too() -> None:
    async def judge(ctx: Context) -> list[Proposal]:
        await asyncio.sleep(0)
        if ctx.count("n") >= 2:
            raise StopRun("enough", context={"why": "async"})
        return []

    result = Engine().register(ticker(), FunctionSuggestor(judge, "judge")).run()
    assert result.stop_reason == StopRequested(
        source="judge", message="enough", context={"why": "async"}
    )


# --- explain --------------------------------------------------------------------------


def test_explain_summarises_every_signal_the_budget_and_the_continuations() -> None:
    spy = OnStopSpy(Continue(budget=Budget(max_cycles=3), note="extend"))
    policies = policies_from_specs([{"type": "content_match", "pattern": "^4$"}])
    engine = Engine(budget=Budget(max_cycles=2), stop_policies=policies, on_stop=spy)

    def numbers(ctx: Context) -> Effect:
        return Effect([Proposal("n", str(ctx.count("n")))], Usage(1, 2, 0.25))

    # cycle 3 is the raised limit; "4" never comes: the cycle budget stops the run
    result = engine.register(FunctionSuggestor(numbers, "numbers")).run()
    assert result.stop_reason == CycleBudgetExhausted(cycles_executed=3, limit=3)
    text = result.explain()
    assert "cycle budget exhausted: 3/3 cycles" in text
    assert "cycles 3/3 (100.0%)" in text
    assert "Continuations:" in text and "cycle 2, past cycle_budget_exhausted" in text
    assert "budget raised" in text and "extend" in text
    assert "3+6 tokens" in text

    both = Engine(
        budget=Budget(max_cycles=5), stop_policies=[Always("a", at=2), Always("b", at=2)]
    ).register(ticker())
    text = both.run().explain()
    assert "Signals (most urgent first):" in text
    assert "policy a [always]" in text and "policy b [always]" in text
    assert text.index("policy a") < text.index("policy b")


def test_every_signal_is_in_the_sqlite_audit_trail_most_urgent_first(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "signals.db"))
    try:
        policies = policies_from_specs(
            [{"type": "loop_detection", "window": 2}, {"type": "cost_budget", "max_usd": 0.1}]
        )
        engine = Engine(stop_policies=policies, store=store)
        result = engine.register(ticker(usage=Usage(0, 0, 0.03))).run(run_id="sql-signals")
        # cycle 4: 4 invocations of tick (a loop of period 1) and $0.12 > $0.10
        assert result.cycles == 4
        assert [s.kind_code() for s in result.signals] == [
            "cost_budget_exhausted",
            "loop_detected",
        ]
        stored = store.events("sql-signals", kinds=["stop_signal", "run_stopped"])
        assert [parse_stop_reason(e.payload) for e in stored[:-1]] == list(result.signals)
        assert stored[-1].kind == "run_stopped"
        assert store.run("sql-signals").kind == "cost_budget_exhausted"
        assert store.verify("sql-signals").ok
    finally:
        store.close()


def test_raising_a_per_suggestor_limit_continues_past_it() -> None:
    spy = OnStopSpy(Continue(budget=Budget(max_cycles=50, per_suggestor={"tick": 4})))
    engine = Engine(budget=Budget(max_cycles=50, per_suggestor={"tick": 2}), on_stop=spy)
    # tock comes first so that each cycle still promotes a fact when tick is refused
    engine.register(ticker("tock"), ticker("tick"))
    result = engine.run()
    assert result.stop_reason == InvocationBudgetExhausted(invocations=4, limit=4, suggestor="tick")
    assert len(spy.calls) == 2 and [k.budget_raised for k in result.continuations] == [True]
