"""Stop conditions (gates.policies), trigger boundaries through real runs: each kind
fires exactly at its limit (exceeded or reached, as documented), not a cycle early or
late, and a limit of 0 disables its spec."""

from __future__ import annotations

from typing import Any

import pytest

from engine import (
    Budget,
    ConsecutiveErrorsExceeded,
    Context,
    Converged,
    CostBudgetExhausted,
    CycleBudgetExhausted,
    Effect,
    Engine,
    Finished,
    FunctionSuggestor,
    InvocationBudgetExhausted,
    LoopDetected,
    PolicyStopped,
    Proposal,
    RunResult,
    TimeBudgetExhausted,
    TokenBudgetExhausted,
    Usage,
)
from gates.policies import apply_stop_conditions, policies_from_specs
from tests.stopfixtures import FakeClock, failing, relay, run_with, ticker


def test_max_rounds_stops_after_exactly_that_many_cycles() -> None:
    result = run_with([{"type": "max_rounds", "rounds": 3}], ticker())
    assert result.stop_reason == CycleBudgetExhausted(cycles_executed=3, limit=3)
    assert result.cycles == 3 and [f.content for f in result.facts] == [0, 1, 2]


def test_timeout_fires_once_elapsed_time_exceeds_the_limit_not_when_it_equals_it() -> None:
    clock = FakeClock()

    def slow(ctx: Context) -> list[Proposal]:
        clock.now += 1.0  # each cycle takes one second
        return [Proposal("n", ctx.count("n"))]

    s = FunctionSuggestor(slow, "slow")
    result = run_with([{"type": "timeout", "seconds": 2}], s, clock=clock)
    # elapsed after cycle 2 is 2000 ms == limit: goes on; after cycle 3 it is 3000 ms
    assert result.stop_reason == TimeBudgetExhausted(duration_ms=3000, limit_ms=2000)
    assert result.cycles == 3


def test_timeout_lowered_into_the_budget_stops_before_the_next_cycle() -> None:
    clock = FakeClock()

    def slow(ctx: Context) -> list[Proposal]:
        clock.now += 1.0
        return [Proposal("n", ctx.count("n"))]

    budget, policies = apply_stop_conditions(Budget(), [{"type": "timeout", "seconds": 2.5}])
    engine = Engine(budget=budget, stop_policies=policies, clock=clock)
    result = engine.register(FunctionSuggestor(slow, "slow")).run()
    assert result.stop_reason == TimeBudgetExhausted(duration_ms=3000, limit_ms=2500)
    assert result.cycles == 3


def test_token_budget_counts_input_plus_output_and_fires_only_when_exceeded() -> None:
    result = run_with(
        [{"type": "token_budget", "max_total": 10}], ticker(usage=Usage(3, 2))
    )  # 5 tokens a cycle: 10 after cycle 2 is not over the limit, 15 after cycle 3 is
    assert result.stop_reason == TokenBudgetExhausted(tokens_consumed=15, limit=10)
    assert result.cycles == 3


def test_consecutive_errors_stops_on_the_third_error_in_a_row() -> None:
    result = run_with(
        [{"type": "consecutive_errors", "max": 3}], ticker(), failing(), on_error="continue"
    )
    reason = result.stop_reason
    assert isinstance(reason, ConsecutiveErrorsExceeded)
    assert (reason.errors, reason.limit, result.cycles) == (3, 3, 3)
    assert "flaky" in reason.last_error and "boom in cycle 3" in reason.last_error
    assert len(result.facts) == 3  # the facts promoted meanwhile are kept


def test_consecutive_errors_does_not_fire_when_a_success_splits_the_streak() -> None:
    # fails in cycles 1, 2, 4, 5, 7, 8: never three in a row
    flaky = failing(fails=lambda cycle: cycle % 3 != 0)
    result = run_with(
        [{"type": "consecutive_errors", "max": 3}],
        ticker(),
        flaky,
        on_error="continue",
        budget=Budget(max_cycles=9),
    )
    assert result.stop_reason == CycleBudgetExhausted(cycles_executed=9, limit=9)


def test_consecutive_errors_is_moot_with_on_error_stop() -> None:
    result = run_with([{"type": "consecutive_errors", "max": 3}], ticker(), failing())
    assert result.stop_reason.kind_code() == "error" and result.cycles == 1


@pytest.mark.parametrize(
    ("spec", "policy_id"),
    [
        ({"type": "stop_on_suggestor", "name": "finish"}, "stop_on_suggestor"),
        ({"type": "stop_on_tool", "tool_name": "finish"}, "stop_on_tool"),
    ],
)
def test_stop_on_suggestor_finishes_right_after_that_suggestor_ran(
    spec: dict[str, Any], policy_id: str
) -> None:
    chain = [relay("a", "k0", "k1"), relay("finish", "k1", "k2"), relay("c", "k2", "k3")]
    result = run_with([spec], *chain, initial={"k0": [0]})
    assert result.stop_reason == Finished(suggestor="finish", message="ran in cycle 2")
    assert result.stop_reason.is_success() and result.stop_reason.exit_code == 0
    assert result.cycles == 2 and not result.context.has("k3")
    assert policies_from_specs([spec])[0].id == policy_id


def test_stop_on_suggestor_never_fires_when_that_suggestor_does_not_run() -> None:
    chain = [relay("a", "k0", "k1"), relay("c", "k1", "k2")]
    result = run_with(
        [{"type": "stop_on_suggestor", "name": "finish"}], *chain, initial={"k0": [0]}
    )
    assert result.stop_reason == Converged()


def log_writer(lines: list[Any]) -> FunctionSuggestor:
    """Writes ``lines`` to ``log``, one a cycle."""

    def run(ctx: Context) -> list[Proposal]:
        i = ctx.count("log")
        return [Proposal("log", lines[i])] if i < len(lines) else []

    return FunctionSuggestor(run, "logger")


def test_content_match_stops_on_the_first_new_fact_matching_the_pattern() -> None:
    writer = log_writer(["ok 1", "retry 2", "ERROR 42: disk full", "ok 4"])
    result = run_with([{"type": "content_match", "pattern": r"ERROR \d+"}], writer)
    reason = result.stop_reason
    assert isinstance(reason, PolicyStopped)
    assert (reason.policy_id, reason.code) == ("content_match", "content_match")
    assert "ERROR 42" in reason.detail and "log#2" in reason.detail
    assert result.cycles == 3 and len(result.facts) == 3


def test_content_match_searches_other_content_as_canonical_json() -> None:
    writer = log_writer([{"status": "ok"}, {"status": "failed", "code": 7}])
    result = run_with([{"type": "content_match", "pattern": '"status":"failed"'}], writer)
    assert isinstance(result.stop_reason, PolicyStopped) and result.cycles == 2


def test_content_match_with_a_key_ignores_facts_of_other_keys() -> None:
    writer = log_writer(["ok", "ERROR 1", "ok"])
    result = run_with([{"type": "content_match", "pattern": "ERROR", "key": "alerts"}], writer)
    assert result.stop_reason == Converged()


def test_loop_detection_catches_a_two_cycle_after_twice_the_window() -> None:
    ping, pong = relay("ping", "pong", "ping"), relay("pong", "ping", "pong")
    result = run_with([{"type": "loop_detection", "window": 4}], ping, pong, initial={"pong": [0]})
    assert result.stop_reason == LoopDetected(window=4, pattern=["ping", "pong"])
    assert result.cycles == 8  # 2 * window invocations, one per cycle
    # one cycle fewer: not yet a loop
    short = run_with(
        [{"type": "loop_detection", "window": 4}],
        relay("ping", "pong", "ping"),
        relay("pong", "ping", "pong"),
        initial={"pong": [0]},
        budget=Budget(max_cycles=7),
    )
    assert short.stop_reason == CycleBudgetExhausted(cycles_executed=7, limit=7)


def _watched_for_loops(relays: list[FunctionSuggestor], first: str, max_cycles: int) -> RunResult:
    """A run of ``relays`` from ``{first: [0]}`` within ``max_cycles``, under loop
    detection with a window of 4."""
    return run_with(
        [{"type": "loop_detection", "window": 4}],
        *relays,
        initial={first: [0]},
        budget=Budget(max_cycles=max_cycles),
    )


def test_loop_detection_catches_a_three_cycle_within_a_window_of_four() -> None:
    trio = [relay("a", "c", "a"), relay("b", "a", "b"), relay("c", "b", "c")]
    result = _watched_for_loops(trio, "c", max_cycles=50)
    assert result.stop_reason == LoopDetected(window=4, pattern=["a", "b", "c"])
    assert result.cycles == 8


def test_loop_detection_never_fires_on_a_chain_of_sixty_suggestors() -> None:
    chain = [relay(f"s{i}", f"k{i}", f"k{i + 1}") for i in range(60)]
    result = _watched_for_loops(chain, "k0", max_cycles=100)
    assert result.stop_reason == Converged()
    assert result.cycles == 61 - 1 and result.context.get("k60")[0].content == 60


def test_loop_detection_does_not_fire_on_a_period_longer_than_the_window() -> None:
    five = [relay(f"p{i}", f"k{(i - 1) % 5}", f"k{i}") for i in range(5)]
    result = _watched_for_loops(five, "k4", max_cycles=30)
    assert result.stop_reason == CycleBudgetExhausted(cycles_executed=30, limit=30)


def test_cost_budget_fires_once_the_reported_cost_exceeds_the_limit() -> None:
    result = run_with([{"type": "cost_budget", "max_usd": 0.05}], ticker(usage=Usage(0, 0, 0.02)))
    reason = result.stop_reason
    assert isinstance(reason, CostBudgetExhausted) and reason.limit_usd == 0.05
    assert result.cycles == 3 and reason.cost_usd == pytest.approx(0.06)


def test_invocation_budget_as_a_policy_stops_once_the_total_is_reached() -> None:
    result = run_with([{"type": "invocation_budget", "max_total": 5}], ticker())
    assert result.stop_reason == InvocationBudgetExhausted(invocations=5, limit=5)
    assert result.cycles == 5


def test_invocation_budget_per_suggestor_names_the_suggestor() -> None:
    spec = {"type": "invocation_budget", "per_suggestor": {"tock": 2, "tick": 0}}
    result = run_with([spec], ticker(), ticker("tock", "m"))
    assert result.stop_reason == InvocationBudgetExhausted(invocations=2, limit=2, suggestor="tock")
    assert result.cycles == 2


# --- 0 disables --------------------------------------------------------------


DISABLED = [
    {"type": "max_rounds", "rounds": 0},
    {"type": "timeout", "seconds": 0},
    {"type": "token_budget", "max_total": 0},
    {"type": "consecutive_errors", "max": 0},
    {"type": "loop_detection", "window": 0},
    {"type": "cost_budget", "max_usd": 0},
    {"type": "invocation_budget", "max_total": 0, "per_suggestor": {"tick": 0}},
]


@pytest.mark.parametrize("spec", DISABLED, ids=[s["type"] for s in DISABLED])
def test_a_zero_limit_disables_the_spec(spec: dict[str, Any]) -> None:
    clock = FakeClock()

    def busy(ctx: Context) -> Effect:
        clock.now += 10.0
        return Effect([Proposal("n", ctx.count("n"))], Usage(100, 100, 1.0))

    result = run_with(
        [spec],
        FunctionSuggestor(busy, "tick"),
        failing(),
        budget=Budget(max_cycles=12),
        clock=clock,
        on_error="continue",
    )
    assert result.stop_reason == CycleBudgetExhausted(cycles_executed=12, limit=12)
    budget, _ = apply_stop_conditions(Budget(max_cycles=12), [spec])
    assert budget == Budget(max_cycles=12)
