"""Recorded values as a person reads them: :func:`readable`, :func:`iso_utc`.

Apart from :mod:`converge.reports` (which re-exports them), whose pydantic models a
command that only prints a recorded value (``converge gates``, ``events``, ``facts``)
need not build.
"""

from __future__ import annotations

import time
from typing import Any

from engine.hashing.commitment import redaction_note

__all__ = ["TIME_FIELDS", "is_time_field", "iso_utc", "readable"]


def iso_utc(ts: float | None) -> str:
    """Unix seconds as ISO 8601 UTC, ``YYYY-MM-DDTHH:MM:SSZ`` ("" for None); a value
    that is no date (an edited cell) as stored."""
    if ts is None:
        return ""
    try:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))
    except (OverflowError, OSError, ValueError, TypeError):
        return str(ts)


TIME_FIELDS = ("ts", "at", "deadline")
"""Field names (besides those ending ``_at``) whose numbers are unix seconds."""


def is_time_field(name: str) -> bool:
    """Whether a payload field ``name`` holds unix seconds (``opened_at``, ``ts``...)."""
    return name.endswith("_at") or name in TIME_FIELDS


def readable(value: Any, name: str = "") -> str:
    """A recorded value as a person reads it: a string as is, unix seconds (a field
    ``name`` such as ``opened_at``) in ISO UTC, a mapping as ``key=value, ...`` (its
    empty fields left out, a nested mapping in parentheses, a list in brackets), a
    list comma-separated, ``true``/``false``, ``-`` for None. Never JSON, never a
    Python repr."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float) and is_time_field(name) and value > 0:
        return iso_utc(value)
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, dict):
        note = redaction_note(value) if len(value) == 1 else None
        if note is not None:  # a redacted fact's content (docs/audit.md, "Redaction")
            return note
        parts = []
        for k, v in value.items():
            if v is None or v == "" or v == [] or v == {} or v is False:
                continue
            text = readable(v, str(k))
            if isinstance(v, dict):
                text = f"({text})"
            elif isinstance(v, list | tuple):
                text = f"[{text}]"
            parts.append(f"{k}={text}")
        return ", ".join(parts) if parts else "-"
    if isinstance(value, list | tuple):
        return ", ".join(readable(v) for v in value) if value else "-"
    return str(value)
