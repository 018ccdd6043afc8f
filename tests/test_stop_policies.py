"""Stop conditions (gates.policies), the happy paths: every kind parses and is a
policy, the budget-like kinds lower into the budget, custom policies stop runs, and
the stats a policy sees are run-scoped.

Negative cases: test_stop_policies_negative.py; trigger boundaries and ``0``
disables: test_stop_policies_boundaries.py; properties: test_stop_policies_properties.py.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from converge.jobs import parse_job
from engine import (
    Budget,
    CycleBudgetExhausted,
    Engine,
    InvocationBudgetExhausted,
    PolicyStopped,
    Usage,
)
from gates.policies import (
    SPEC_TYPES,
    ContentMatchSpec,
    RunStats,
    StopDecision,
    StopPolicy,
    apply_stop_conditions,
    load_stop_conditions,
    parse_stop_conditions,
    policies_from_specs,
)
from tests.stopfixtures import JOB, failing, run_with, ticker

# --- parsing -----------------------------------------------------------------


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


# --- lowering ----------------------------------------------------------------


def test_a_job_file_lowers_max_rounds_over_its_budget_and_keeps_the_rest_as_policies() -> None:
    job = parse_job(JOB.format(spec="{type: max_rounds, rounds: 7}"), "policies.yaml")
    engine = job.build_engine()
    assert engine.budget.max_cycles == 7  # the spec wins over budget.max_cycles: 20
    assert [p.id for p in engine.stop_policies] == ["loop_detection"]
    result = engine.run()
    # tick is a 1-cycle loop: loop_detection{window: 4} catches it after 8 invocations,
    # but max_rounds: 7 comes first
    assert result.stop_reason == CycleBudgetExhausted(cycles_executed=7, limit=7)


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


# --- custom policies and run-scoped stats ------------------------------------


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
