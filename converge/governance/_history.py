"""A gate's history: everything that happened to it, in order, for ``converge gates
GATE --history`` and ``GET /api/gates/{id}/history``.

From the run's chain: the gate opening (with its rules), each vote, comment,
escalation and the decision; from the access log: every refused decision (403)
naming who and why; from the notification outbox: each delivery's outcome.
"""

from __future__ import annotations

from typing import Any

from audit.notifications import deliveries
from audit.people import access_entries
from audit.store import SqlRunStore
from engine.errors import CorruptRow

CHAINED = ("gate_opened", "gate_vote", "gate_comment", "gate_escalated", "gate_decided")
"""The kinds of the run's chained events that belong to a gate's history."""


def gate_history(store: SqlRunStore, gate_id: str) -> list[dict[str, Any]]:
    """``[{ts, kind, by, detail}]`` oldest first (``ts`` unix seconds). A row of the
    access log or the outbox that cannot be read is ``{ts: None, kind:
    "unreadable", by: None, detail: {"error"}}``, last. Raises ``GateNotFound``, and
    ``CorruptRow`` when the gate or one of its chained events cannot be read."""
    gate = store.get_gate(gate_id)
    corrupt: list[CorruptRow] = []
    out: list[dict[str, Any]] = []
    for e in store.events(gate.run_id, kinds=list(CHAINED)):
        if e.payload.get("gate_id") != gate_id:
            continue
        p = e.payload
        detail = {k: v for k, v in p.items() if k not in ("gate_id", "by", "proposal")}
        out.append({"ts": e.ts, "kind": e.kind, "by": p.get("by"), "detail": detail})
    for a in access_entries(store, gate_id, corrupt):
        out.append(
            {
                "ts": a.ts,
                "kind": f"refused_{a.action}",
                "by": a.name,
                "detail": {"outcome": a.outcome, "why": a.detail, "client": a.client},
            }
        )
    out.extend(_deliveries(store, gate_id, corrupt))
    unreadable = [
        {"ts": None, "kind": "unreadable", "by": None, "detail": {"error": str(e)}} for e in corrupt
    ]
    return sorted(out, key=lambda entry: float(entry["ts"])) + unreadable


def _deliveries(
    store: SqlRunStore, gate_id: str, corrupt: list[CorruptRow]
) -> list[dict[str, Any]]:
    """The notification outcomes of the gate (``audit.notifications._outbox``)."""
    out: list[dict[str, Any]] = []
    for d in deliveries(store, gate_id, corrupt):
        detail = d.to_dict()
        out.append(
            {"ts": d.last_at or d.first_at, "kind": "notification", "by": None, "detail": detail}
        )
    return out
