"""Job files: valid ones build the engine they describe; bad ones name file, line, field."""

from __future__ import annotations

from pathlib import Path

import pytest

from converge.errors import JobFileError
from converge.jobs import load_job, parse_job
from engine import Budget, CycleBudgetExhausted
from engine.references import resolve_reference

GOOD = """\
name: ticker
suggestors: [tests.jobfixtures:tick]
budget: {max_cycles: 4}
criteria: [tests.jobfixtures:never]
invariants: [tests.jobfixtures:small]
gates:
  - hitl: {keys: [gated], summary: "Check {content}"}
  - min_confidence: {threshold: 0.2}
initial: {n: [100]}
"""


def test_a_valid_job_builds_the_engine_it_describes() -> None:
    job = parse_job(GOOD, "good.yaml")
    engine = job.build_engine()
    assert engine.suggestor_names == ("tick",)
    assert engine.budget == Budget(max_cycles=4)
    assert [c.id for c in engine.criteria] == ["never"]
    assert len(engine.hitl_policies) == 1 and len(engine.promotion_gates) == 1
    result = engine.run(job.spec.initial)
    assert isinstance(result.stop_reason, CycleBudgetExhausted)
    assert result.stop_reason.cycles_executed == 4


@pytest.mark.parametrize(
    ("text", "line", "field"),
    [
        (
            "name: x\nsuggestors: [tests.jobfixtures:tick]\nbudget:\n  max_cycles: -3\n",
            4,
            "budget.max_cycles",
        ),
        ("name: x\nsuggestors: []\n", 2, "suggestors"),
        ("name: x\nsuggestors: [tests.jobfixtures:tick]\ncolour: blue\n", 3, "colour"),
        ("suggestors: [tests.jobfixtures:tick]\n", 1, "name"),
        (
            "name: x\nsuggestors: [a:b]\ngates:\n  - {hitl: {keys: [k]}, promotion: a:b}\n",
            4,
            "gates.0",
        ),
    ],
)
def test_a_malformed_job_names_the_file_the_line_and_the_field(
    text: str, line: int, field: str
) -> None:
    with pytest.raises(JobFileError) as info:
        parse_job(text, "bad.yaml")
    message = str(info.value)
    assert message.startswith(f"bad.yaml:{line}: {field}"), message
    assert "\n" not in message


def test_invalid_yaml_names_the_line() -> None:
    with pytest.raises(
        JobFileError,
        match=r"^bad.yaml:2: invalid YAML at column 13: the .\[. opened here is never closed",
    ):
        parse_job("name: x\nsuggestors: [a:b\n", "bad.yaml")


def test_an_unknown_suggestor_reference_is_a_job_file_error_with_its_line() -> None:
    job = parse_job(
        "name: x\nsuggestors:\n  - tests.jobfixtures:tick\n  - tests.jobfixtures:nope\n", "j.yaml"
    )
    with pytest.raises(
        JobFileError,
        match=r"^j.yaml:4: suggestors.1: module 'tests.jobfixtures' has no attribute 'nope'",
    ):
        job.build_engine()


def test_an_unimportable_module_is_a_job_file_error() -> None:
    job = parse_job("name: x\nsuggestors: [no_such_module_xyz:thing]\n", "j.yaml")
    with pytest.raises(JobFileError, match="cannot import module 'no_such_module_xyz'"):
        job.build_engine()


def test_a_missing_file_is_a_job_file_error(tmp_path: Path) -> None:
    with pytest.raises(JobFileError, match="cannot read job file"):
        load_job(tmp_path / "absent.yaml")


def test_references_to_classes_and_factories_are_instantiated() -> None:
    made = resolve_reference("tests.jobfixtures:make_pair")
    assert [s.name for s in made] == ["pair_a", "pair_b"]
    assert resolve_reference("tests.jobfixtures:Small").name == "small_class"


def test_a_reference_without_a_colon_is_rejected() -> None:
    job = parse_job("name: x\nsuggestors: [tests.jobfixtures]\n", "j.yaml")
    with pytest.raises(JobFileError, match="is not a 'module:attribute' reference"):
        job.build_engine()
