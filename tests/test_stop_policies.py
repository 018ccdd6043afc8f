"""Stop conditions (gates.policies): parsing, exact trigger boundaries, 0 disables,
errors that name the culprit, custom policies and run-scoped stats."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from converge.jobs import parse_job
from engine import (
    Budget,
    ConfigurationError,
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
    JobFileError,
    LoopDetected,
    PolicyStopped,
    Proposal,
    RunResult,
    TimeBudgetExhausted,
    TokenBudgetExhausted,
    Usage,
)
from gates.policies import (
    SPEC_TYPES,
    ContentMatchSpec,
    LoopDetection,
    RunStats,
    StopDecision,
    StopPolicy,
    apply_stop_conditions,
    load_stop_conditions,
    parse_stop_conditions,
    policies_from_specs,
)

# --- helpers -------------------------------------------------------------------


def ticker(name: str = "tick", key: str = "n", usage: Usage | None = None) -> FunctionSuggestor:
    """Dependency-free: proposes a new number every cycle (never converges)."""

    def run(ctx: Context) -> Effect:
        return Effect([Proposal(key, ctx.count(key))], usage or Usage())

    return FunctionSuggestor(run, name)


def failing(name: str = "flaky", fails: Any = lambda cycle: True) -> FunctionSuggestor:
    """Dependency-free: raises in the cycles where ``fails(cycle)`` is true."""

    def run(ctx: Context) -> Effect:
        if fails(ctx.cycle):
            raise RuntimeError(f"boom in cycle {ctx.cycle}")
        return Effect()

    return FunctionSuggestor(run, name)


def relay(name: str, reads: str, writes: str) -> FunctionSuggestor:
    """Reads the newest fact of ``reads`` and writes its content + 1 to ``writes``."""

    def run(ctx: Context) -> list[Proposal]:
        facts = ctx.get(reads)
        return [Proposal(writes, facts[-1].content + 1)] if facts else []

    return FunctionSuggestor(run, name, dependencies=[reads])


def run_with(
    specs: list[dict[str, Any]],
    *suggestors: FunctionSuggestor,
    budget: Budget | None = None,
    clock: Any = None,
    on_error: Any = "stop",
    initial: dict[str, list[Any]] | None = None,
) -> RunResult:
    engine = Engine(
        budget=budget or Budget(max_cycles=50),
        stop_policies=policies_from_specs(specs),
        on_error=on_error,
        clock=clock,
    )
    engine.register(*suggestors)
    return engine.run(initial)


class FakeClock:
    """A monotonic clock (seconds) that suggestors advance."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# --- parsing -------------------------------------------------------------------

EXAMPLES: dict[str, dict[str, Any]] = {
    "max_rounds": {"type": "max_rounds", "rounds": 10},
    "timeout": {"type": "timeout", "seconds": 30},
    "token_budget": {"type": "token_budget", "max_total": 100_000},
    "consecutive_errors": {"type": "consecutive_errors", "max": 3},
    "stop_on_suggestor": {"type": "stop_on_suggestor", "name": "finish"},
    "stop_on_tool": {"type": "stop_on_tool", "tool_name": "finish"},
    "content_match": {"type": "content_match", "pattern": "ERROR \\d+", "key": "log"},
    "loop_detection": {"type": "loop_detection", "window": 4},
    "cost_budget": {"type": "cost_budget", "max_usd": 2.5},
    "invocation_budget": {"type": "invocation_budget", "max_total": 50, "per_suggestor": {"a": 5}},
    "policy": {"policy": "tests.test_stop_policies:HaltAtFiveFacts"},
}


def test_the_examples_cover_every_kind_of_the_union() -> None:
    assert set(EXAMPLES) == set(SPEC_TYPES)


@pytest.mark.parametrize("kind", sorted(EXAMPLES))
def test_every_kind_parses_from_a_dict_with_its_fields(kind: str) -> None:
    (spec,) = parse_stop_conditions([EXAMPLES[kind]])
    assert isinstance(spec, SPEC_TYPES[kind])
    assert spec.type == kind
    for name, value in EXAMPLES[kind].items():
        assert getattr(spec, name) == value


@pytest.mark.parametrize("kind", sorted(EXAMPLES))
def test_every_kind_parses_from_yaml_like_from_a_dict(kind: str) -> None:
    block = yaml.safe_dump({"stop_conditions": [EXAMPLES[kind]]}, default_flow_style=False)
    flow = yaml.safe_dump([EXAMPLES[kind]], default_flow_style=True)
    assert load_stop_conditions(block) == parse_stop_conditions([EXAMPLES[kind]])
    assert load_stop_conditions(flow) == parse_stop_conditions([EXAMPLES[kind]])


def test_a_hand_written_yaml_list_parses_in_order() -> None:
    text = """
stop_conditions:
  - type: loop_detection
    window: 4
  - {type: stop_on_tool, tool_name: finish}
  - {type: content_match, pattern: "FATAL"}
"""
    specs = load_stop_conditions(text)
    assert [s.type for s in specs] == ["loop_detection", "stop_on_tool", "content_match"]
    assert isinstance(specs[2], ContentMatchSpec) and specs[2].key is None


@pytest.mark.parametrize("kind", sorted(EXAMPLES))
def test_every_kind_is_implemented_by_a_policy(kind: str) -> None:
    (policy,) = policies_from_specs([EXAMPLES[kind]])
    assert isinstance(policy, StopPolicy)
    assert policy.evaluate(RunStats()) is None  # nothing happened yet: never fires


# --- errors --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "named"),
    [
        ({"type": "max_turns", "rounds": 3}, "max_turns"),
        ({"type": "max_rounds", "rounds": -1}, "rounds"),
        ({"type": "max_rounds", "rounds": 3, "round": 2}, "round"),
        ({"type": "max_rounds"}, "rounds"),
        ({"type": "timeout", "seconds": "soon"}, "seconds"),
        ({"type": "content_match", "pattern": "(unclosed"}, "pattern"),
        ({"type": "invocation_budget", "per_suggestor": {"a": -2}}, "per_suggestor"),
        ({"type": "stop_on_tool", "name": "finish"}, "tool_name"),
        ({"policy": "no colon"}, "policy"),
        ({"rounds": 3}, "type"),
    ],
)
def test_an_unknown_kind_or_a_bad_field_is_an_error_naming_it(
    spec: dict[str, Any], named: str
) -> None:
    with pytest.raises(ValidationError) as info:
        policies_from_specs([{"type": "loop_detection", "window": 2}, spec])
    assert named in str(info.value)
    assert info.value.errors()[0]["loc"][0] == 1  # the entry's index


def test_a_custom_reference_that_is_not_a_stop_policy_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match=r"tests\.test_stop_policies:ticker"):
        policies_from_specs([{"policy": "tests.test_stop_policies:ticker"}])
    with pytest.raises(ConfigurationError, match="no_such_module"):
        policies_from_specs([{"policy": "no_such_module:Policy"}])


def test_a_lowered_kind_given_twice_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="max_rounds is given twice"):
        apply_stop_conditions(
            Budget(), [{"type": "max_rounds", "rounds": 3}, {"type": "max_rounds", "rounds": 4}]
        )


JOB = """\
name: policies
suggestors: [tests.jobfixtures:tick]
budget: {{max_cycles: 20}}
stop_conditions:
  - {{type: loop_detection, window: 4}}
  - {spec}
"""


@pytest.mark.parametrize(
    ("spec", "named"),
    [
        ("{type: bogus_kind, window: 4}", "bogus_kind"),
        ("{type: token_budget, max_total: -5}", "max_total"),
        ("{type: cost_budget, max_usd: 1, currency: EUR}", "currency"),
        ("{policy: 'tests.test_stop_policies:nothing_here'}", "nothing_here"),
    ],
)
def test_a_bad_stop_condition_in_a_job_file_is_a_job_file_error(spec: str, named: str) -> None:
    job = parse_job(JOB.format(spec=spec), "policies.yaml")
    with pytest.raises(JobFileError) as info:
        job.build_engine()
    message = str(info.value)
    assert "policies.yaml" in message and "stop_conditions" in message and named in message
    assert info.value.line is not None and info.value.line >= 4


def test_a_job_file_lowers_max_rounds_over_its_budget_and_keeps_the_rest_as_policies() -> None:
    job = parse_job(JOB.format(spec="{type: max_rounds, rounds: 7}"), "policies.yaml")
    engine = job.build_engine()
    assert engine.budget.max_cycles == 7  # the spec wins over budget.max_cycles: 20
    assert [p.id for p in engine.stop_policies] == ["loop_detection"]
    result = engine.run()
    # tick is a 1-cycle loop: loop_detection{window: 4} catches it after 8 invocations,
    # but max_rounds: 7 comes first
    assert result.stop_reason == CycleBudgetExhausted(cycles_executed=7, limit=7)


# --- lowering ------------------------------------------------------------------


def test_apply_stop_conditions_lowers_rounds_timeout_and_invocations_and_the_spec_wins() -> None:
    budget = Budget(max_cycles=20, max_seconds=120, per_suggestor={"a": 1, "b": 2})
    specs = [
        {"type": "max_rounds", "rounds": 40},
        {"type": "timeout", "seconds": 30},
        {"type": "invocation_budget", "max_total": 9, "per_suggestor": {"b": 5, "c": 0}},
        {"type": "loop_detection", "window": 3},
        {"type": "token_budget", "max_total": 1000},
    ]
    new_budget, policies = apply_stop_conditions(budget, specs)
    assert new_budget.max_cycles == 40 and new_budget.max_seconds == 30
    assert new_budget.max_invocations == 9
    assert new_budget.per_suggestor == {"a": 1, "b": 5}  # c: 0 disables that entry
    assert new_budget.max_facts == budget.max_facts
    assert [p.id for p in policies] == ["loop_detection", "token_budget"]
    assert budget.max_cycles == 20  # the caller's budget is left alone


def test_a_disabled_lowered_spec_leaves_the_budget_as_it_is() -> None:
    budget = Budget(max_cycles=20, max_seconds=120)
    specs = [
        {"type": "max_rounds", "rounds": 0},
        {"type": "timeout", "seconds": 0},
        {"type": "invocation_budget", "max_total": 0},
    ]
    assert apply_stop_conditions(budget, specs) == (budget, [])


def test_a_lowered_invocation_budget_is_never_exceeded() -> None:
    budget, policies = apply_stop_conditions(
        Budget(max_cycles=50), [{"type": "invocation_budget", "max_total": 5}]
    )
    engine = Engine(budget=budget, stop_policies=policies).register(ticker(), ticker("tock", "m"))
    result = engine.run()
    assert result.stop_reason == InvocationBudgetExhausted(invocations=5, limit=5)
    assert result.budget_status.dimensions["invocations"].used == 5


# --- trigger boundaries, through real runs -----------------------------------------


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


def test_loop_detection_catches_a_three_cycle_within_a_window_of_four() -> None:
    trio = [relay("a", "c", "a"), relay("b", "a", "b"), relay("c", "b", "c")]
    result = run_with([{"type": "loop_detection", "window": 4}], *trio, initial={"c": [0]})
    assert result.stop_reason == LoopDetected(window=4, pattern=["a", "b", "c"])
    assert result.cycles == 8


def test_loop_detection_never_fires_on_a_chain_of_sixty_suggestors() -> None:
    chain = [relay(f"s{i}", f"k{i}", f"k{i + 1}") for i in range(60)]
    result = run_with(
        [{"type": "loop_detection", "window": 4}],
        *chain,
        initial={"k0": [0]},
        budget=Budget(max_cycles=100),
    )
    assert result.stop_reason == Converged()
    assert result.cycles == 61 - 1 and result.context.get("k60")[0].content == 60


def test_loop_detection_does_not_fire_on_a_period_longer_than_the_window() -> None:
    five = [relay(f"p{i}", f"k{(i - 1) % 5}", f"k{i}") for i in range(5)]
    result = run_with(
        [{"type": "loop_detection", "window": 4}],
        *five,
        initial={"k4": [0]},
        budget=Budget(max_cycles=30),
    )
    assert result.stop_reason == CycleBudgetExhausted(cycles_executed=30, limit=30)


names = st.sampled_from(["a", "b", "c", "d", "e"])


@given(
    unit=st.lists(names, min_size=1, max_size=4),
    window=st.integers(min_value=1, max_value=6),
    prefix=st.lists(names, max_size=5),
)
def test_loop_detection_fires_on_any_repeated_unit_no_longer_than_the_window(
    unit: list[str], window: int, prefix: list[str]
) -> None:
    if len(unit) > window:
        return
    repeats = (2 * window) // len(unit) + 1
    history = prefix + unit * repeats
    decision = LoopDetection(window).evaluate(RunStats(invocation_history=history))
    assert decision is not None and isinstance(decision.reason, LoopDetected)
    pattern = decision.reason.pattern
    assert len(pattern) <= len(unit)
    assert len(unit) % len(pattern) == 0  # the shortest period divides the unit's length


@given(window=st.integers(min_value=1, max_value=8), length=st.integers(min_value=0, max_value=80))
def test_loop_detection_never_fires_on_distinct_names(window: int, length: int) -> None:
    history = [f"s{i}" for i in range(length)]
    assert LoopDetection(window).evaluate(RunStats(invocation_history=history)) is None


@given(history=st.lists(names, max_size=30), window=st.integers(min_value=1, max_value=6))
def test_loop_detection_fires_exactly_when_the_tail_is_periodic(
    history: list[str], window: int
) -> None:
    tail = history[-2 * window :]
    periodic = len(history) >= 2 * window and any(
        all(tail[i] == tail[i + p] for i in range(len(tail) - p)) for p in range(1, window + 1)
    )
    decision = LoopDetection(window).evaluate(RunStats(invocation_history=history))
    assert (decision is not None) == periodic


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


# --- 0 disables ------------------------------------------------------------------

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


# --- custom policies and run-scoped stats -------------------------------------------


class HaltAtFiveFacts:
    """A custom policy: stop once the context holds five facts."""

    id = "halt_at_five"

    def evaluate(self, stats: RunStats) -> StopDecision | None:
        if stats.facts_count >= 5:
            return StopDecision("enough_facts", f"{stats.facts_count} facts")
        return None


def test_a_custom_policy_stops_with_policy_stopped_and_its_own_code() -> None:
    result = run_with([{"policy": "tests.test_stop_policies:HaltAtFiveFacts"}], ticker())
    assert result.stop_reason == PolicyStopped(
        policy_id="halt_at_five", code="enough_facts", detail="5 facts"
    )
    assert result.stop_reason.is_policy_stop() and result.stop_reason.exit_code == 6
    assert result.cycles == 5


def test_a_custom_policy_object_works_without_specs_and_through_a_job_file() -> None:
    engine = Engine(budget=Budget(max_cycles=50), stop_policies=[HaltAtFiveFacts()])
    assert engine.register(ticker()).run().stop_reason.kind_code() == "policy_stopped"
    job = parse_job(JOB.format(spec="{policy: 'tests.test_stop_policies:HaltAtFiveFacts'}"))
    result = job.build_engine().run()
    assert isinstance(result.stop_reason, PolicyStopped) and result.cycles == 5


class Recorder:
    """Records every RunStats it is shown; stops at cycle 3."""

    id = "recorder"

    def __init__(self) -> None:
        self.seen: list[RunStats] = []

    def evaluate(self, stats: RunStats) -> StopDecision | None:
        self.seen.append(stats)
        return StopDecision("three", "cycle 3") if stats.cycle >= 3 else None


def test_stats_are_run_scoped_and_reset_for_the_next_run() -> None:
    recorder = Recorder()
    engine = Engine(stop_policies=[recorder]).register(
        ticker(usage=Usage(1, 1, 0.5)), failing(fails=lambda c: c == 3)
    )
    engine.on_error = "continue"
    first = engine.run()
    first_stats = recorder.seen[-1]
    assert first_stats.consecutive_errors == 1 and first_stats.cycle == 3
    recorder.seen.clear()
    second = engine.run()
    assert first.run_id != second.run_id and second.cycles == 3
    fresh = recorder.seen[0]
    assert (fresh.cycle, fresh.invocations, fresh.facts_count) == (1, 2, 1)
    assert (fresh.total_input_tokens, fresh.total_output_tokens, fresh.cost_usd) == (1, 1, 0.5)
    assert fresh.consecutive_errors == 0 and fresh.last_error is None
    assert list(fresh.invocation_history) == ["tick", "flaky"]


def test_a_policy_that_raises_stops_the_run_with_a_configuration_error() -> None:
    class Broken:
        id = "broken"

        def evaluate(self, stats: RunStats) -> StopDecision | None:
            raise ZeroDivisionError("oops")

    result = Engine(stop_policies=[Broken()]).register(ticker()).run()
    assert result.stop_reason.is_error() and "broken" in str(result.stop_reason)
