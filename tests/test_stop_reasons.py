"""The stop vocabulary: every variant's table row, predicates, text and JSON (DESIGN.md §5)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, get_args

import pytest
from pydantic import ValidationError

from engine.stop import (
    ALL_VARIANTS,
    STOP_REASON_ADAPTER,
    StopCategory,
    StopReason,
    parse_stop_reason,
)
from engine.stop_reference import stop_category_of, stop_reasons_markdown, variant_signature

ROOT = Path(__file__).resolve().parent.parent

# DESIGN.md §5, written out literally so the code cannot drift from the contract:
# (variant, fields in order, category, priority, CLI exit code).
DESIGN_TABLE: list[tuple[str, tuple[str, ...], str, int, int]] = [
    ("Converged", (), "success", 7, 0),
    ("CriteriaMet", ("criteria",), "success", 7, 0),
    ("Finished", ("suggestor", "message"), "success", 7, 0),
    ("UserCancelled", (), "cancelled", 2, 130),
    ("StopRequested", ("source", "message", "context"), "cancelled", 2, 130),
    ("CycleBudgetExhausted", ("cycles_executed", "limit"), "budget", 3, 3),
    ("FactBudgetExhausted", ("facts_count", "limit"), "budget", 3, 3),
    ("TokenBudgetExhausted", ("tokens_consumed", "limit"), "budget", 3, 3),
    ("TimeBudgetExhausted", ("duration_ms", "limit_ms"), "budget", 3, 3),
    ("CostBudgetExhausted", ("cost_usd", "limit_usd"), "budget", 3, 3),
    ("InvocationBudgetExhausted", ("invocations", "limit", "suggestor"), "budget", 3, 3),
    ("InvariantViolated", ("invariant_class", "name", "reason"), "validation", 1, 4),
    ("PromotionRejected", ("proposal_id", "reason"), "validation", 1, 4),
    ("CriteriaUnmet", ("criteria",), "validation", 1, 4),
    ("Error", ("message", "error_category"), "error", 0, 5),
    ("ConsecutiveErrorsExceeded", ("errors", "limit", "last_error"), "error", 0, 5),
    ("AgentRefused", ("agent_id", "reason"), "error", 0, 5),
    ("LoopDetected", ("window", "pattern"), "policy", 4, 6),
    ("PolicyStopped", ("policy_id", "code", "detail"), "policy", 4, 6),
    ("HitlGatePending", ("gate_id", "proposal_id", "summary", "agent_id", "cycle"), "hitl", 5, 10),
    ("HumanInterventionRequired", ("criteria", "approval_refs"), "human", 6, 11),
]

# One instance of each variant, with every field set (shared with the JSON tests).
SAMPLES: dict[str, dict[str, Any]] = {
    "Converged": {},
    "CriteriaMet": {"criteria": ["a", "b"]},
    "Finished": {"suggestor": "writer", "message": "done"},
    "UserCancelled": {},
    "StopRequested": {"source": "s", "message": "enough", "context": {"n": 1, "why": ["x"]}},
    "CycleBudgetExhausted": {"cycles_executed": 3, "limit": 3},
    "FactBudgetExhausted": {"facts_count": 11, "limit": 10},
    "TokenBudgetExhausted": {"tokens_consumed": 120, "limit": 100},
    "TimeBudgetExhausted": {"duration_ms": 250, "limit_ms": 200},
    "CostBudgetExhausted": {"cost_usd": 1.5, "limit_usd": 1.0},
    "InvocationBudgetExhausted": {"invocations": 4, "limit": 4, "suggestor": "s"},
    "InvariantViolated": {"invariant_class": "semantic", "name": "inv", "reason": "broken"},
    "PromotionRejected": {"proposal_id": "s/1/0.0", "reason": "bad"},
    "CriteriaUnmet": {"criteria": ["c"]},
    "Error": {"message": "boom", "error_category": "suggestor"},
    "ConsecutiveErrorsExceeded": {"errors": 3, "limit": 3, "last_error": "s: boom"},
    "AgentRefused": {"agent_id": "s", "reason": "no"},
    "LoopDetected": {"window": 2, "pattern": ["a", "b"]},
    "PolicyStopped": {"policy_id": "p", "code": "C1", "detail": "d"},
    "HitlGatePending": {
        "gate_id": "g1",
        "proposal_id": "s/1/0.0",
        "summary": "approve it",
        "agent_id": "s",
        "cycle": 2,
    },
    "HumanInterventionRequired": {"criteria": ["signed"], "approval_refs": ["LEGAL-1"]},
}

# The predicates of §5, by category.
PREDICATES: dict[str, frozenset[str]] = {
    "is_success": frozenset({"success", "cancelled"}),
    "is_budget_exhausted": frozenset({"budget"}),
    "is_validation_failure": frozenset({"validation"}),
    "is_error": frozenset({"error"}),
    "is_hitl_pending": frozenset({"hitl"}),
    "is_human_intervention_required": frozenset({"human"}),
    "is_cancelled": frozenset({"cancelled"}),
    "is_policy_stop": frozenset({"policy"}),
    "was_force_stopped": frozenset({"cancelled", "budget", "validation", "error", "policy"}),
    "is_resumable": frozenset({"budget", "policy", "hitl", "cancelled"}),
}


def _sample(name: str) -> StopReason:
    kind = next(v for v in ALL_VARIANTS if v.__name__ == name).model_fields["kind"].default
    return parse_stop_reason({"kind": kind, **SAMPLES[name]})


def test_the_union_has_exactly_the_21_variants_of_the_design_in_its_order() -> None:
    assert [v.__name__ for v in ALL_VARIANTS] == [row[0] for row in DESIGN_TABLE]
    assert len(ALL_VARIANTS) == 21
    union, _discriminator = get_args(StopReason)
    assert get_args(union) == ALL_VARIANTS


@pytest.mark.parametrize("row", DESIGN_TABLE, ids=[row[0] for row in DESIGN_TABLE])
def test_each_variant_has_the_fields_category_priority_and_exit_code_of_the_design(
    row: tuple[str, tuple[str, ...], str, int, int],
) -> None:
    name, fields, category, priority, exit_code = row
    reason = _sample(name)
    assert type(reason).__name__ == name
    assert tuple(f for f in type(reason).model_fields if f != "kind") == fields
    assert reason.category == StopCategory(category)
    assert stop_category_of(reason) == StopCategory(category)
    assert reason.priority == priority
    assert reason.exit_code == exit_code


@pytest.mark.parametrize("row", DESIGN_TABLE, ids=[row[0] for row in DESIGN_TABLE])
def test_kind_is_the_snake_case_of_the_class_name(
    row: tuple[str, tuple[str, ...], str, int, int],
) -> None:
    reason = _sample(row[0])
    snake = "".join("_" + c.lower() if c.isupper() else c for c in row[0]).lstrip("_")
    assert reason.kind == snake == reason.kind_code()


@pytest.mark.parametrize("row", DESIGN_TABLE, ids=[row[0] for row in DESIGN_TABLE])
def test_every_predicate_follows_the_category(
    row: tuple[str, tuple[str, ...], str, int, int],
) -> None:
    reason = _sample(row[0])
    for predicate, categories in PREDICATES.items():
        assert getattr(reason, predicate)() is (row[2] in categories), predicate


@pytest.mark.parametrize("name", list(SAMPLES))
def test_str_is_one_human_line_and_explain_adds_kind_category_and_advice(name: str) -> None:
    reason = _sample(name)
    text = str(reason)
    assert text and "\n" not in text
    assert not text.startswith(type(reason).__name__ + "(")  # not the pydantic repr
    explained = reason.explain()
    assert text in explained
    assert reason.kind_code() in explained and reason.category.value in explained
    assert len(explained) > len(text) + 20


@pytest.mark.parametrize("name", list(SAMPLES))
def test_json_round_trips_through_parse_stop_reason_as_dict_and_as_string(name: str) -> None:
    reason = _sample(name)
    as_dict = json.loads(reason.model_dump_json())
    assert parse_stop_reason(as_dict) == reason
    assert parse_stop_reason(json.dumps(as_dict)) == reason
    assert parse_stop_reason(reason.model_dump_json().encode()) == reason
    assert STOP_REASON_ADAPTER.dump_python(reason, mode="json") == as_dict


def test_an_unknown_kind_is_a_validation_error() -> None:
    with pytest.raises(ValidationError):
        parse_stop_reason({"kind": "gave_up"})
    with pytest.raises(ValidationError):
        parse_stop_reason('{"kind": "gave_up"}')


def test_a_missing_or_extra_field_is_a_validation_error() -> None:
    with pytest.raises(ValidationError):
        parse_stop_reason({"kind": "cycle_budget_exhausted", "limit": 3})
    with pytest.raises(ValidationError):
        parse_stop_reason({"kind": "converged", "surprise": 1})


def test_variants_are_frozen_values_compared_by_value() -> None:
    a = _sample("CycleBudgetExhausted")
    assert a == _sample("CycleBudgetExhausted")
    with pytest.raises(ValidationError):
        a.limit = 4  # type: ignore[misc,union-attr]


def test_the_stop_reasons_doc_is_generated_from_the_code() -> None:
    doc = ROOT / "docs" / "stop-reasons.md"
    expected = stop_reasons_markdown()
    assert doc.read_text(encoding="utf-8") == expected, (
        "docs/stop-reasons.md differs from the code; regenerate it with "
        '.venv/bin/python -c "import engine.stop_reference as s; s.write_stop_reasons_doc()"'
    )


def test_the_stop_reasons_doc_has_one_row_per_variant_with_the_design_values() -> None:
    text = stop_reasons_markdown()
    for name, _fields, category, priority, exit_code in DESIGN_TABLE:
        variant = next(v for v in ALL_VARIANTS if v.__name__ == name)
        sig = variant_signature(variant).replace("|", "\\|")
        assert f"| `{sig}` |" in text
        assert f"| {category} | {priority} | {exit_code} |" in text.split(f"`{sig}`")[1]


_MATCH_SNIPPET = """\
from typing import assert_never

from engine.stop import *  # noqa: F403


def handle(reason: StopReason) -> int:
    match reason:
{cases}
        case _:
            assert_never(reason)
"""


def _snippet(names: list[str]) -> str:
    cases = "\n".join(f"        case {n}():\n            return {i}" for i, n in enumerate(names))
    return _MATCH_SNIPPET.format(cases=cases)


def test_mypy_proves_a_match_over_stop_reason_exhaustive_and_catches_a_missing_variant(
    tmp_path: Path,
) -> None:
    names = [v.__name__ for v in ALL_VARIANTS]
    (tmp_path / "complete.py").write_text(_snippet(names))
    (tmp_path / "missing.py").write_text(_snippet([n for n in names if n != "LoopDetected"]))
    # one mypy process for both files: each reports its own errors
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-incremental",
            "--cache-dir=/dev/null",
            "--follow-imports=silent",
            str(tmp_path / "complete.py"),
            str(tmp_path / "missing.py"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    out = proc.stdout + proc.stderr
    assert "complete.py" not in out, out
    assert "missing.py" in out and "LoopDetected" in out, out
    assert "assert_never" in out or "Never" in out, out
    assert proc.returncode == 1


def test_the_static_table_of_kinds_is_every_variants_kind_and_category() -> None:
    """engine.stop_categories.STOP_KINDS, what a listing knows without the models, is
    each variant's kind and category, in the order of the stop table."""
    from engine.stop_categories import STOP_KINDS

    assert list(STOP_KINDS.items()) == [
        (v.model_fields["kind"].default, v.category_) for v in ALL_VARIANTS
    ]
