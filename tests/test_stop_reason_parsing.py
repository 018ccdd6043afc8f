"""``parse_stop_reason`` on any input: its documented ``ValidationError`` or a reason
that writes back to the same JSON (issue: reliability, item 6)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from engine.stop import ALL_VARIANTS, StopReason, parse_stop_reason
from tests.strategies import json_trees, nested_dicts

KINDS = [v.model_fields["kind"].default for v in ALL_VARIANTS]
FIELDS = sorted({f for v in ALL_VARIANTS for f in v.model_fields if f != "kind"})

leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(),
    st.sampled_from(["\ud800", "suggestor", "storage", "acceptance", "x" * 2000]),
)
values = json_trees(leaves, key_size=4, max_leaves=12)
reasons = st.fixed_dictionaries(
    {"kind": st.one_of(st.sampled_from(KINDS), st.text(max_size=8), values)},
    optional={f: values for f in FIELDS},
)


def _check(data: Any) -> None:
    try:
        reason = parse_stop_reason(data)
    except ValidationError:
        return
    assert parse_stop_reason(reason.model_dump_json()) == reason
    assert parse_stop_reason(json.loads(reason.model_dump_json())) == reason


@settings(max_examples=400, deadline=None, derandomize=True)
@given(data=reasons)
def test_any_dict_is_a_validation_error_or_a_reason_that_round_trips(data: dict[str, Any]) -> None:
    _check(data)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(text=st.one_of(st.text(), st.binary()))
def test_any_text_or_bytes_is_a_validation_error_or_a_reason_that_round_trips(
    text: str | bytes,
) -> None:
    _check(text)


@pytest.mark.parametrize("levels", [40, 300, 3000])
def test_a_deep_stop_requested_context_parses_and_round_trips(levels: int) -> None:
    data = {
        "kind": "stop_requested",
        "source": "s",
        "message": "m",
        "context": nested_dicts(levels),
    }
    reason: StopReason = parse_stop_reason(data)
    assert parse_stop_reason(reason.model_dump_json()) == reason


@pytest.mark.parametrize("text", ["[" * 5000, '{"kind": ' * 3000, '"\\ud800"'])
def test_pathological_json_text_is_a_validation_error(text: str) -> None:
    with pytest.raises(ValidationError):
        parse_stop_reason(text)
