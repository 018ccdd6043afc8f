"""Run events: a run's audit events as typed, frozen values, as they are recorded.

``Engine.stream`` / ``astream`` / ``stream_resume`` yield them while a run goes on
(docs/streaming.md); ``converge watch`` and the inbox's ``GET /api/runs/{id}/events``
show the same events read back from a store. Each mirrors one audit event
(docs/audit.md): ``kind``, ``run_id``, ``seq`` (its place in the run's chain, from 1;
None when the engine has no store), ``cycle``, ``ts`` (unix seconds) and its JSON
``payload``; the kinds a user follows have a class with typed fields, every other
kind is an :class:`OtherEvent`. :func:`run_event` builds one from a recorded event.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.effect import Usage
from engine.facts import Fact, fact_from_dict
from engine.stop import StopReason, parse_stop_reason

__all__ = [
    "CycleStarted",
    "FactPromoted",
    "GateDecided",
    "GateOpened",
    "OtherEvent",
    "RunEvent",
    "RunPaused",
    "RunResumed",
    "RunStarted",
    "RunStopped",
    "SuggestorExecuted",
    "SuggestorFailed",
    "UsageRecorded",
    "run_event",
]


@dataclass(frozen=True, slots=True)
class RunEvent:
    """One recorded event of a run: ``kind`` (an ``engine.store.EVENT_KINDS`` name),
    ``run_id``, ``seq`` (int from 1, or None without a store), ``cycle`` (0 = before
    the first), ``ts`` (unix seconds), ``payload`` (the event's JSON object)."""

    kind: str
    run_id: str
    seq: int | None
    cycle: int
    ts: float
    payload: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        """The JSON-ready dict ``{kind, run_id, seq, cycle, ts, payload}`` (the ``data:``
        of the inbox's event stream, a line of ``converge watch --json``)."""
        return {
            "kind": self.kind,
            "run_id": self.run_id,
            "seq": self.seq,
            "cycle": self.cycle,
            "ts": self.ts,
            "payload": self.payload,
        }


@dataclass(frozen=True, slots=True)
class RunStarted(RunEvent):
    """``run_started``: the ``job`` (None: none), the ``suggestors`` registered and the
    number of ``initial_facts``."""

    job: str | None
    suggestors: tuple[str, ...]
    initial_facts: int


@dataclass(frozen=True, slots=True)
class CycleStarted(RunEvent):
    """``cycle_started``: the ``eligible`` suggestors of cycle ``cycle``."""

    eligible: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SuggestorExecuted(RunEvent):
    """``suggestor_executed``: ``suggestor`` returned ``proposals`` proposals and used ``usage``."""

    suggestor: str
    proposals: int
    usage: Usage


@dataclass(frozen=True, slots=True)
class SuggestorFailed(RunEvent):
    """``suggestor_failed``: ``suggestor`` raised or returned something invalid (``error``)."""

    suggestor: str
    error: str


@dataclass(frozen=True, slots=True)
class UsageRecorded(RunEvent):
    """``usage_recorded``: ``usage`` spent by a failed or cut execution of ``suggestor``."""

    suggestor: str
    usage: Usage


@dataclass(frozen=True, slots=True)
class FactPromoted(RunEvent):
    """``fact_promoted``: ``fact`` joined the context."""

    fact: Fact


@dataclass(frozen=True, slots=True)
class GateOpened(RunEvent):
    """``gate_opened``: a proposal of ``suggestor`` waits on gate ``gate_id`` (``summary``)."""

    gate_id: str
    suggestor: str
    summary: str


@dataclass(frozen=True, slots=True)
class GateDecided(RunEvent):
    """``gate_decided``: gate ``gate_id`` was decided (``status``: approved, rejected or
    expired) by ``by`` (None when not recorded)."""

    gate_id: str
    status: str
    by: str | None


@dataclass(frozen=True, slots=True)
class RunPaused(RunEvent):
    """``run_paused``: the run waits on a person (``reason``, a ``HitlGatePending``),
    after ``cycles`` cycles with ``facts_count`` facts."""

    reason: StopReason
    cycles: int
    facts_count: int


@dataclass(frozen=True, slots=True)
class RunResumed(RunEvent):
    """``run_resumed``: a leg begins, after gate ``gate_id`` was decided (None: a
    stopped run resumed with a budget)."""

    gate_id: str | None


@dataclass(frozen=True, slots=True)
class RunStopped(RunEvent):
    """``run_stopped``: the run stopped with ``reason`` after ``cycles`` cycles, with
    ``facts_count`` facts, having used ``usage``."""

    reason: StopReason
    cycles: int
    facts_count: int
    usage: Usage


@dataclass(frozen=True, slots=True)
class OtherEvent(RunEvent):
    """Any other kind (stop signals, checkpoints, rejected proposals, votes...): the
    payload only."""


def _usage(value: Any) -> Usage:
    tokens_in, tokens_out, cost = value
    return Usage(int(tokens_in), int(tokens_out), float(cost))


def _typed(kind: str, p: dict[str, Any], fact: Fact | None) -> dict[str, Any] | None:
    """The typed fields of an event of ``kind`` (None: an :class:`OtherEvent`)."""
    match kind:
        case "run_started":
            job = p.get("job")
            return {
                "job": None if job is None else str(job),
                "suggestors": tuple(str(s) for s in p.get("suggestors", ())),
                "initial_facts": len(p.get("initial_facts") or ()),
            }
        case "cycle_started":
            return {"eligible": tuple(str(s) for s in p.get("eligible", ()))}
        case "suggestor_executed":
            return {
                "suggestor": str(p["suggestor"]),
                "proposals": int(p.get("proposals", 0)),
                "usage": _usage(p.get("usage", (0, 0, 0.0))),
            }
        case "suggestor_failed":
            return {"suggestor": str(p["suggestor"]), "error": str(p.get("error", ""))}
        case "usage_recorded":
            return {"suggestor": str(p["suggestor"]), "usage": _usage(p["usage"])}
        case "fact_promoted":
            return {"fact": fact if fact is not None else fact_from_dict(p)}
        case "gate_opened":
            return {
                "gate_id": str(p["gate_id"]),
                "suggestor": str(p.get("suggestor", "")),
                "summary": str(p.get("summary", "")),
            }
        case "gate_decided":
            by = p.get("by", p.get("decided_by"))
            return {
                "gate_id": str(p["gate_id"]),
                "status": str(p.get("status", "")),
                "by": None if by is None else str(by),
            }
        case "run_paused":
            return {
                "reason": parse_stop_reason(p["reason"]),
                "cycles": int(p["cycles"]),
                "facts_count": int(p["facts_count"]),
            }
        case "run_resumed":
            gate = p.get("gate_id")
            return {"gate_id": None if gate is None else str(gate)}
        case "run_stopped":
            return {
                "reason": parse_stop_reason(p["reason"]),
                "cycles": int(p["cycles"]),
                "facts_count": int(p["facts_count"]),
                "usage": _usage(p["usage"]),
            }
    return None


_CLASSES: dict[str, type[RunEvent]] = {
    "run_started": RunStarted,
    "cycle_started": CycleStarted,
    "suggestor_executed": SuggestorExecuted,
    "suggestor_failed": SuggestorFailed,
    "usage_recorded": UsageRecorded,
    "fact_promoted": FactPromoted,
    "gate_opened": GateOpened,
    "gate_decided": GateDecided,
    "run_paused": RunPaused,
    "run_resumed": RunResumed,
    "run_stopped": RunStopped,
}


def run_event(
    run_id: str,
    seq: int | None,
    kind: str,
    cycle: int,
    ts: float,
    payload: dict[str, Any],
    fact: Fact | None = None,
) -> RunEvent:
    """The typed event of a recorded one (``fact``: the promoted fact, when the caller
    has it). A payload whose fields are not of their kind's shape (an edited row, an
    older converge) gives an :class:`OtherEvent` rather than an error."""
    cls = _CLASSES.get(kind)
    if cls is not None:
        try:
            fields = _typed(kind, payload, fact)
        except (KeyError, TypeError, ValueError, AttributeError):
            fields = None  # pydantic's ValidationError is a ValueError
        if fields is not None:
            return cls(kind, run_id, seq, cycle, ts, payload, **fields)
    return OtherEvent(kind, run_id, seq, cycle, ts, payload)
