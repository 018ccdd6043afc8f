"""docs/stop-conditions.md says what the code does: its tables and examples are checked."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from engine import Budget, Engine, RunStats, StopRun
from gates.policies import (
    SPEC_TYPES,
    StopDecision,
    apply_stop_conditions,
    load_stop_conditions,
)
from tests.test_stop_policies import EXAMPLES

DOC = Path(__file__).resolve().parent.parent / "docs" / "stop-conditions.md"
ORIGINS = {"awaken", "tirea", "Cognesy", "budgets guide"}


def _table(header: str) -> list[list[str]]:
    """The rows (cells stripped) of the first table whose header row starts with ``header``."""
    lines = DOC.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split(" | ")])
    return rows


def _ticked(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


KINDS = {row[0].strip("`"): row for row in _table("| kind | fields (units) |")}


def test_the_kinds_table_lists_every_kind_of_the_union_and_nothing_else() -> None:
    assert sorted(KINDS) == sorted(SPEC_TYPES)


@pytest.mark.parametrize("kind", sorted(SPEC_TYPES))
def test_each_row_names_the_kinds_fields_with_units_its_variant_and_origin(kind: str) -> None:
    _, fields_cell, variant_cell, origin_cell = KINDS[kind]
    model = SPEC_TYPES[kind]
    # a documented field is a backticked name followed by its unit in parentheses
    documented = re.findall(r"`([a-z_]+)` \(", fields_cell)
    assert sorted(documented) == sorted(set(model.model_fields) - {"type"}), fields_cell
    assert _ticked(variant_cell) == [model.yields.__name__]
    origins = {o.strip() for o in origin_cell.split(",")}
    assert origins <= ORIGINS and origins == {o.strip() for o in model.origin.split(",")}


def test_the_lowering_table_lists_exactly_the_kinds_apply_stop_conditions_lowers() -> None:
    lowered_in_doc = {_ticked(row[0])[0].split("{")[0] for row in _table("| spec | budget field")}
    lowered_in_code = set()
    for kind, example in EXAMPLES.items():
        if kind == "policy":
            continue
        budget, policies = apply_stop_conditions(Budget(), [example])
        if not policies:
            assert budget != Budget(), kind
            lowered_in_code.add(kind)
    assert lowered_in_doc == lowered_in_code == {"max_rounds", "timeout", "invocation_budget"}


def _code_blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)


def test_the_yaml_example_parses_to_the_kinds_it_shows() -> None:
    (job_part,) = [b for b in _code_blocks("yaml") if "stop_conditions:" in b]
    specs = load_stop_conditions(job_part)
    assert [s.type for s in specs] == [
        "loop_detection",
        "consecutive_errors",
        "content_match",
        "stop_on_suggestor",
        "policy",
    ]


def test_the_python_examples_run() -> None:
    namespace: dict[str, Any] = {}
    blocks = _code_blocks("python")
    for block in blocks[:3]:  # policies_from_specs, a custom policy, the override
        exec(block, namespace)
    assert isinstance(namespace["engine"], Engine)
    policy = namespace["HaltOnDrift"]()
    assert policy.evaluate(RunStats(cycle=11, facts_count=501)) == StopDecision(
        "drift", "501 facts after 11 cycles"
    )
    assert policy.evaluate(RunStats(cycle=11, facts_count=500)) is None
    # the StopRun example, with the condition it leaves to the reader
    namespace = {"good_enough": lambda ctx: True}
    exec(blocks[3], namespace)
    with pytest.raises(StopRun) as info:
        namespace["judge"](None)
    assert info.value.context == {"score": 0.93}
