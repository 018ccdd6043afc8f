"""A run's story per cycle, folded from its audit events (what ``converge show`` prints).

:func:`timeline` groups the events of one run by cycle: suggestors executed and
failed, facts promoted (count and keys), proposals rejected, gates opened and
decided, stop signals and continuations. :func:`last_budget_status` returns the
budget status the run recorded when it stopped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from audit.queries._queries import StoredEvent
from engine.errors import CorruptRow

if TYPE_CHECKING:  # built where a budget is read: a listing builds no budget model
    from engine.budget import BudgetStatus


@dataclass
class CycleSummary:
    """What happened in one cycle (0 = before the first: the run's start):
    ``proposed`` is how many proposals its suggestors returned, ``promoted`` how many
    became facts (a proposal equal to a fact already there is dropped)."""

    cycle: int
    eligible: list[str] = field(default_factory=list)
    executed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    proposed: int = 0
    promoted: int = 0
    promoted_keys: Counter[str] = field(default_factory=Counter)
    rejected: list[str] = field(default_factory=list)
    gates: list[str] = field(default_factory=list)
    signals: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready dict of the summary."""
        return {
            "cycle": self.cycle,
            "eligible": self.eligible,
            "executed": self.executed,
            "failed": self.failed,
            "proposed": self.proposed,
            "promoted": self.promoted,
            "promoted_keys": dict(self.promoted_keys),
            "rejected": self.rejected,
            "gates": self.gates,
            "signals": self.signals,
            "notes": self.notes,
        }


def timeline(events: Iterable[StoredEvent]) -> list[CycleSummary]:
    """One :class:`CycleSummary` per cycle that has events, in cycle order;
    ``CorruptRow`` for an event whose payload is not of its kind's shape."""
    by_cycle: dict[int, CycleSummary] = {}
    decided: dict[str, str] = {}  # gate id -> "approved by X": what a resume follows
    for ev in events:
        s = by_cycle.get(ev.cycle)
        if s is None:
            s = by_cycle[ev.cycle] = CycleSummary(ev.cycle)
        try:
            _fold(s, ev, decided)
        except (TypeError, ValueError, AttributeError, KeyError) as exc:
            # a payload of another shape than its kind's (an edited row)
            where = f"run {ev.run_id} event {ev.seq}"
            raise CorruptRow(
                "audit_events", where, "payload", f"not a {ev.kind} ({exc!r})"
            ) from exc
    return [by_cycle[c] for c in sorted(by_cycle)]


PAUSED = "\x00paused"
"""The key of ``decided`` (in :func:`_fold`) set while the run is paused."""


def _value(value: Any) -> str:
    """A human's answer (a decision's ``value``) as one short phrase."""
    if isinstance(value, dict):
        # a classification: the fields a person gave (spdx=MIT), not the copied ones
        fields = [f"{k}={v}" for k, v in value.items() if isinstance(v, str | int | float)]
        return ", ".join(fields)
    return str(value)


def _fold(s: CycleSummary, ev: StoredEvent, decided: dict[str, str]) -> None:
    """Add one event to its cycle's summary (``decided``: each gate's decision so
    far, so a resume says which decision it follows)."""
    p = ev.payload
    match ev.kind:
        case "run_started":
            taken = (p.get("forked_from") or {}).get("facts") or {}
            if isinstance(taken, dict) and taken.get("count") and not p.get("initial_facts"):
                s.notes.append(f"run started with {taken['count']} facts taken from its parent")
            else:
                s.notes.append(f"run started with {len(p.get('initial_facts', []))} input facts")
        case "cycle_started":
            s.eligible = list(p.get("eligible", []))
        case "suggestor_executed":
            name = str(p.get("suggestor"))
            if p.get("refusal") is not None:
                name += f" (refused: {p['refusal']})"
            s.executed.append(name)
            s.proposed += int(p.get("proposals") or 0)
        case "suggestor_failed":
            s.failed.append(f"{p.get('suggestor')}: {p.get('error')}")
        case "usage_recorded":
            i, o, c = [*(p.get("usage") or []), 0, 0, 0.0][:3]
            who = p.get("suggestor")
            s.notes.append(f"{who} recorded {i}+{o} tokens, ${c} it did not return")
        case "fact_promoted":
            s.promoted += 1
            s.promoted_keys[str(p.get("key"))] += 1
        case "proposal_rejected":
            s.rejected.append(
                f"{p.get('proposal_id')} by {p.get('gate')}: {p.get('reason')}"
                + (" (dropped)" if p.get("on_reject") == "drop" else "")
            )
        case "gate_opened":
            s.gates.append(f"opened {p.get('gate_id')}: {p.get('summary')}")
        case "gate_decided":
            verdict = "approved" if p.get("approved") else "rejected"
            why = f" ({p['reason']})" if p.get("reason") else ""
            value = f", value {_value(p['value'])}" if p.get("value") is not None else ""
            s.gates.append(f"{verdict} {p.get('gate_id')} by {p.get('by')}{value}{why}")
            decided.pop(str(p.get("gate_id")), None)
            decided[str(p.get("gate_id"))] = f"{verdict} by {p.get('by')}"
        case "stop_signal" | "invariant_violated":
            s.signals.append(str(p.get("kind")))
        case "run_continued":
            s.notes.append(f"continued past {len(p.get('signals', []))} signal(s)")
        case "run_paused":
            s.notes.append("paused")
            decided.pop(PAUSED, None)
            decided[PAUSED] = "yes"  # last: the gates decided since come after it
        case "run_resumed":
            gate = p.get("gate_id")
            last = list(decided)[-1] if decided else PAUSED
            if gate is None and PAUSED in decided and last != PAUSED:
                gate = last  # a paused run resumed after its gate's decision
            decided.pop(PAUSED, None)
            if gate is not None:
                how = decided.get(str(gate))
                s.notes.append(f"resumed after gate {gate}" + (f", {how}" if how else ""))
            elif p.get("from") == "stop":
                s.notes.append("resumed after its stop")
            else:
                s.notes.append(f"resumed from {p.get('from')}")
        case "run_stopped":
            s.notes.append(f"stopped: {p.get('kind')} ({p.get('category')})")
        case "run_requeued":
            s.notes.append("put back in the queue: its worker stopped")
        case _:
            s.notes.append(ev.kind)


def last_budget_status(events: Iterable[StoredEvent]) -> BudgetStatus | None:
    """The budget status of the run's last ``run_stopped`` event (None if it never
    stopped); ``CorruptRow`` when it is no budget status."""
    from pydantic import ValidationError

    from engine.budget import BudgetStatus

    found: BudgetStatus | None = None
    for ev in events:
        if ev.kind == "run_stopped" and "budget_status" in ev.payload:
            try:
                found = BudgetStatus.model_validate(ev.payload["budget_status"])
            except ValidationError as exc:
                where = f"run {ev.run_id} event {ev.seq}"
                why = f"no budget status ({exc.error_count()} errors)"
                raise CorruptRow("audit_events", where, "payload", why) from exc
    return found
