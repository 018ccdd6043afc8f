"""Stop conditions (gates.policies), negative: an unknown kind, a bad field, a bad
reference or a policy that raises is an error naming the culprit, never a silent skip."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from converge.errors import JobFileError
from converge.jobs import parse_job
from engine import Budget, ConfigurationError, Engine
from gates.policies import RunStats, StopDecision, apply_stop_conditions, policies_from_specs
from tests.stopfixtures import JOB, ticker


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


def test_a_policy_that_raises_stops_the_run_with_a_configuration_error() -> None:
    class Broken:
        id = "broken"

        def evaluate(self, stats: RunStats) -> StopDecision | None:
            raise ZeroDivisionError("oops")

    result = Engine(stop_policies=[Broken()]).register(ticker()).run()
    assert result.stop_reason.is_error() and "broken" in str(result.stop_reason)
