"""Gates read for a list: a row that cannot be read is marked in its place, so one
corrupt cell (a ``proposal`` that is not JSON, a text in ``cycle``) never hides
the other gates, as :func:`audit.queries._queries.read_runs` does for runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from audit.core import StoreCore
from audit.tables import gates
from audit.trail._gates import gate_record
from engine.errors import CorruptRow
from engine.status import GateStatus
from engine.store import GateRecord


@dataclass(frozen=True, slots=True)
class UnreadableGate:
    """A ``gates`` row :func:`read_gates` could not read: ``error`` names the cell;
    ``run_id`` is its run's id when that cell could be read (None otherwise)."""

    gate_id: str
    run_id: str | None
    error: CorruptRow

    def to_dict(self) -> dict[str, Any]:
        """``{"gate_id", "run_id", "error", "column"}``: how a list of gates marks this one."""
        return {
            "gate_id": self.gate_id,
            "run_id": self.run_id,
            "error": str(self.error),
            "column": self.error.column,
        }


def unreadable(m: Any, error: CorruptRow) -> UnreadableGate:
    """The :class:`UnreadableGate` of the row mapping ``m``."""
    run_id = m["run_id"]
    return UnreadableGate(str(m["gate_id"]), run_id if isinstance(run_id, str) else None, error)


def read_gates(store: StoreCore, pending: bool = False) -> list[GateRecord | UnreadableGate]:
    """HITL gates, newest first (only ``pending`` ones when asked); a row that
    cannot be read is an :class:`UnreadableGate` in its place. Raises
    ``StoreError`` when the database fails."""
    q = select(gates)
    if pending:
        q = q.where(gates.c.status == GateStatus.PENDING)
    q = q.order_by(gates.c.opened_at.desc(), gates.c.gate_id.desc())
    out: list[GateRecord | UnreadableGate] = []
    with store.transaction(write=False) as conn:
        for r in conn.execute(q):
            try:
                out.append(gate_record(r._mapping))
            except CorruptRow as exc:
                out.append(unreadable(r._mapping, exc))
    return out
