"""JSON that encodes anywhere: what user code hands the engine, made safe to record.

Suggestors' messages, refusals and ``StopRun`` contexts end up in stop reasons and
in the audit trail (UTF-8 JSON). :func:`json_safe` keeps them readable and makes
them encodable, so that recording a stop never fails on the data that caused it.
"""

from __future__ import annotations

from typing import Any

MAX_NESTING = 32
"""Deepest nesting kept in a stop reason's data (``StopRequested.context``)."""

_MAX_INT = 10**4000


def json_safe(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON that encodes anywhere: lone surrogates replaced, NaN and
    huge integers as text, non-JSON objects as their ``repr``, nesting cut at
    :data:`MAX_NESTING` (deeper values become ``"..."``)."""
    t = type(value)
    if t is str:
        return value if value.isascii() else value.encode("utf-8", "replace").decode("utf-8")
    if t is bool or value is None:
        return value
    if t is int:
        return value if -_MAX_INT < value < _MAX_INT else f"<int of {value.bit_length()} bits>"
    if t is float:
        return (
            value if value == value and value not in (float("inf"), float("-inf")) else repr(value)
        )
    if depth >= MAX_NESTING:
        return "..."
    if isinstance(value, dict):
        return {str(json_safe(str(k))): json_safe(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v, depth + 1) for v in value]
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__name__}>"
    return json_safe(text[:200])
