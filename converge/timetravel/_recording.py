"""A run as its audit trail recorded it, in the shape replay compares: :class:`Recording`.

Read from any store (:func:`read_recording`): the recorded run, and the replay's
own run in its scratch store, so both sides of a comparison come from the same
events. Per cycle: the executions (``suggestor_executed`` / ``suggestor_failed``,
in order) and the facts promoted (``fact_promoted``, in order); the legs after the
first stop (a gate decided, a resume with another budget); the last stop.

A run recovered after its process died (``run_resumed`` from ``crash``) runs again
the cycles after its last checkpoint, promoting nothing twice: the executions the
dead process recorded of the cycles run again are superseded by the recovery's
(its facts stay, the recovery does not promote them again), and the recovery is no
leg (the run went on without a stop).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine import Budget, GateDecision

if TYPE_CHECKING:
    from audit import SqlRunStore

__all__ = ["CycleRecord", "Execution", "Leg", "Recording", "read_recording"]

ACCEPTS_FAILED = "accepts raised"
"""How a ``suggestor_failed`` event of a failing ``accepts(ctx)`` begins its error."""


@dataclass(frozen=True)
class Execution:
    """One execution of a suggestor in a cycle: ``outcome`` is ``executed``,
    ``failed`` or ``stop_requested``; ``payload`` the event's."""

    suggestor: str
    outcome: str
    payload: dict[str, Any]

    @property
    def error(self) -> str | None:
        """The recorded error of a failed execution."""
        value = self.payload.get("error")
        return str(value) if self.outcome == "failed" and value is not None else None

    def summary(self) -> dict[str, Any]:
        """What replay compares of it: the suggestor, the outcome, the error."""
        out: dict[str, Any] = {"suggestor": self.suggestor, "outcome": self.outcome}
        if self.error is not None:
            out["error"] = self.error
        return out


@dataclass
class CycleRecord:
    """The executions and the promoted facts (``fact_to_dict`` dicts) of one cycle."""

    cycle: int
    executions: list[Execution] = field(default_factory=list)
    facts: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Leg:
    """How the run went on after a stop: a gate decided (``gate_id``, ``decision``)
    or a resume with ``budget`` (``converge resume``, ``--add-cycles``)."""

    gate_id: str | None = None
    decision: GateDecision | None = None
    budget: Budget | None = None


@dataclass
class Recording:
    """A run as its events tell it (see the module docstring).

    ``started``: the ``run_started`` payload; ``stop``: the last ``run_stopped`` or
    ``run_paused`` payload (None while running); ``cycles``: by number, from 1.
    """

    run_id: str
    started: dict[str, Any]
    cycles: dict[int, CycleRecord]
    legs: list[Leg]
    stop: dict[str, Any] | None

    @property
    def forked_from(self) -> dict[str, Any] | None:
        """The ``forked_from`` link of a fork's ``run_started`` (None: not a fork)."""
        link = self.started.get("forked_from")
        return link if isinstance(link, dict) else None

    @property
    def last_cycle(self) -> int:
        """The highest cycle with an execution or a fact (0: none)."""
        return max(self.cycles, default=0)

    def initial(self) -> dict[str, list[Any]]:
        """The initial facts as ``Engine.run`` takes them: key → contents, in order."""
        out: dict[str, list[Any]] = {}
        for f in self.started.get("initial_facts", ()):
            out.setdefault(str(f["key"]), []).append(f["content"])
        return out

    def budget(self) -> Budget:
        """The budget the run started with."""
        return Budget.model_validate(self.started.get("budget") or {})

    def execution(self, cycle: int, suggestor: str) -> Execution | None:
        """The execution of ``suggestor`` in ``cycle``, or None when it did not run."""
        rec = self.cycles.get(cycle)
        if rec is None:
            return None
        return next((e for e in rec.executions if e.suggestor == suggestor), None)

    def facts(self) -> list[dict[str, Any]]:
        """Every fact promoted in a cycle, in promotion order (input facts aside)."""
        return [f for n in sorted(self.cycles) for f in self.cycles[n].facts]


def read_recording(store: SqlRunStore, run_id: str) -> Recording:
    """The :class:`Recording` of ``run_id`` in ``store``. Raises ``RunNotFound`` (the
    store's) for an unknown run."""
    events = store.events(run_id)
    started: dict[str, Any] = {}
    cycles: dict[int, CycleRecord] = {}
    decisions: dict[str, GateDecision] = {}
    legs: list[Leg] = []
    stop: dict[str, Any] | None = None

    def cycle(n: int) -> CycleRecord:
        rec = cycles.get(n)
        if rec is None:
            rec = cycles[n] = CycleRecord(n)
        return rec

    recovering = False  # after a recovery, until the cycle it runs again starts
    for ev in events:
        kind, p = ev.kind, ev.payload
        if kind == "run_started":
            started = p
        elif kind == "cycle_started" and recovering:
            recovering = False
            for n, rec in cycles.items():
                if n >= ev.cycle:
                    rec.executions.clear()
        elif kind == "suggestor_executed":
            outcome = "stop_requested" if "stop_requested" in p else "executed"
            cycle(ev.cycle).executions.append(Execution(str(p.get("suggestor")), outcome, p))
        elif kind == "suggestor_failed":
            cycle(ev.cycle).executions.append(Execution(str(p.get("suggestor")), "failed", p))
        elif kind == "fact_promoted":
            cycle(ev.cycle).facts.append(p)
        elif kind == "gate_decided":
            decisions[str(p.get("gate_id"))] = GateDecision(
                approved=bool(p.get("approved")),
                by=str(p.get("by") or "unknown"),
                reason=p.get("reason"),
                value=p.get("value"),
            )
        elif kind == "run_resumed" and p.get("from") == "crash":
            recovering = True
        elif kind == "run_resumed":
            legs.append(_leg(p, decisions))
        elif kind in ("run_stopped", "run_paused"):
            stop = p
    return Recording(run_id, started, dict(sorted(cycles.items())), legs, stop)


def _leg(payload: dict[str, Any], decisions: dict[str, GateDecision]) -> Leg:
    gate_id = payload.get("gate_id")
    if gate_id is not None:
        return Leg(gate_id=str(gate_id), decision=decisions.get(str(gate_id)))
    budget = payload.get("budget")
    return Leg(budget=Budget.model_validate(budget) if isinstance(budget, dict) else None)
