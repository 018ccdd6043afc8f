"""A non-deterministic suggestor played back from its recording: :class:`RecordedSuggestor`.

A suggestor marked ``deterministic = False`` (``@suggestor(deterministic=False)``,
or a job file's ``nondeterministic:``) has its proposals recorded with each
execution (the ``effect`` of its ``suggestor_executed`` event). Replay registers a
:class:`RecordedSuggestor` in its place: it runs in the cycles the recorded run
ran it, and gives back what it gave then (proposals, usage, tool calls, refusal,
signal, audit details), or raises what it raised, without executing its code.
"""

from __future__ import annotations

import re
from typing import Any

from converge.errors import NotRecorded, ReplayedSuggestorError
from converge.timetravel._recording import ACCEPTS_FAILED, Execution, Recording
from engine import (
    Context,
    Effect,
    StopRun,
    Suggestor,
    Usage,
    parse_stop_reason,
)
from engine.facts import proposal_from_dict

__all__ = ["RecordedSuggestor"]

_ENGINE_KEYS = frozenset({"suggestor", "proposals", "usage", "refusal", "tool_calls", "effect"})
"""Keys of a ``suggestor_executed`` payload the engine writes itself; the others are
the effect's own audit details."""

_DESCRIBED = re.compile(r"^([A-Za-z_][\w.]*): (.*)$", re.S)


class RecordedSuggestor:
    """Stands for ``inner`` (same name and dependencies) and plays back its recorded
    executions from ``recording`` (see the module docstring)."""

    deterministic = False
    is_async = False

    def __init__(self, inner: Suggestor, recording: Recording) -> None:
        self.inner = inner
        self.recording = recording
        self.name = inner.name
        self.dependencies = frozenset(getattr(inner, "dependencies", ()) or ())
        self.gen_ai_operation = str(getattr(inner, "gen_ai_operation", "execute_tool"))

    def accepts(self, ctx: Context) -> bool:
        """Yes in the cycles the recorded run executed it (a recorded failure of its
        ``accepts`` is raised again)."""
        ex = self.recording.execution(ctx.cycle, self.name)
        if ex is None:
            return False
        error = ex.error
        if error is not None and error.startswith(ACCEPTS_FAILED):
            raise _replayed_error(error[len(ACCEPTS_FAILED) :].strip())
        return True

    def execute(self, ctx: Context) -> Effect:
        """The recorded effect of this cycle's execution. Raises what the execution
        raised (an exception of the same type name and message, or ``StopRun``), or
        :class:`NotRecorded` when the run kept no output of it."""
        ex = self.recording.execution(ctx.cycle, self.name)
        if ex is None:
            raise NotRecorded(f"{self.name} did not run in cycle {ctx.cycle} of the recorded run")
        if ex.outcome == "failed":
            raise _replayed_error(ex.error or "")
        if ex.outcome == "stop_requested":
            raise StopRun(str(ex.payload.get("stop_requested", "")), context=self._stop_context())
        return _effect(ex, ctx.cycle)

    def _stop_context(self) -> dict[str, Any]:
        """The ``context`` of the ``StopRequested`` this suggestor's ``StopRun`` gave."""
        stop = self.recording.stop or {}
        reason = stop.get("reason") or {}
        if reason.get("kind") == "stop_requested" and reason.get("source") == self.name:
            context = reason.get("context")
            return dict(context) if isinstance(context, dict) else {}
        return {}

    def __repr__(self) -> str:
        return f"<recorded {self.name}>"


def _effect(ex: Execution, cycle: int) -> Effect:
    """The :class:`Effect` an ``executed`` event records (see :class:`RecordedSuggestor`)."""
    p = ex.payload
    record = p.get("effect")
    if not isinstance(record, dict):
        raise NotRecorded(
            f"the recorded run kept no output of {ex.suggestor} in cycle {cycle} (it was not "
            "marked non-deterministic when the run was recorded): replay it with --live"
        )
    usage = p.get("usage") or [0, 0, 0.0]
    signal = record.get("signal")
    audit = {k: v for k, v in p.items() if k not in _ENGINE_KEYS}
    return Effect(
        [proposal_from_dict(d) for d in record.get("proposals", ())],
        usage=Usage(int(usage[0]), int(usage[1]), float(usage[2])),
        refusal=p.get("refusal"),
        tool_calls=tuple(str(t) for t in p.get("tool_calls", ())),
        signal=parse_stop_reason(signal) if isinstance(signal, dict) else None,
        audit=audit or None,
    )


def _replayed_error(described: str) -> Exception:
    """An exception the engine describes as ``described`` (``"Type: message"``): one
    of a class named ``Type``, so the replayed failure reads as the recorded one."""
    m = _DESCRIBED.match(described)
    if m is None:
        return NotRecorded(described)
    cls: type[Exception] = type(m.group(1).rsplit(".", 1)[-1], (ReplayedSuggestorError,), {})
    return cls(m.group(2))
