"""Gates read for a list: a row that cannot be read is marked in its place, so one
corrupt cell (a ``proposal`` that is not JSON, a text in ``cycle``) never hides
the other gates, as :func:`audit.queries._queries.read_runs` does for runs."""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from audit.core import StoreCore
from audit.tables import gates
from audit.trail import gate_record
from engine.errors import AmbiguousGateId, CorruptRow, GateNotFound
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


def read_gates(
    store: StoreCore, pending: bool = False, run_ids: Collection[str] | None = None
) -> list[GateRecord | UnreadableGate]:
    """HITL gates, newest first (only ``pending`` ones when asked; only those of
    ``run_ids`` when given); a row that cannot be read is an
    :class:`UnreadableGate` in its place. Raises ``StoreError`` when the database
    fails."""
    q = select(gates)
    if pending:
        q = q.where(gates.c.status == GateStatus.PENDING)
    if run_ids is not None:
        q = q.where(gates.c.run_id.in_(list(run_ids)))
    q = q.order_by(gates.c.opened_at.desc(), gates.c.gate_id.desc())
    out: list[GateRecord | UnreadableGate] = []
    with store.transaction(write=False) as conn:
        for r in conn.execute(q):
            try:
                out.append(gate_record(r._mapping))
            except CorruptRow as exc:
                out.append(unreadable(r._mapping, exc))
    return out


CANDIDATES = 10
"""How many gate ids an ambiguous or unknown gate's error lists at most."""

_NUMBERED = re.compile(r"^(?P<run>.+)-(?P<n>g\d+)$")


def resolve_gate_id(store: StoreCore, text: str) -> str:
    """The id of the gate ``text`` names: a gate id, a unique prefix of one, a run
    id prefix with the gate's number (``90139c-g1``), or a run id (or a prefix of
    it) whose run has exactly one pending gate.

    Raises :class:`AmbiguousGateId` listing the candidates when several gates fit,
    and ``GateNotFound`` when none does, naming the closest gate ids (did you mean)
    or else the pending gates.
    """
    text = text.strip()
    with store.transaction(write=False) as conn:
        rows = [
            (str(r.gate_id), str(r.run_id), str(r.status))
            for r in conn.execute(
                select(gates.c.gate_id, gates.c.run_id, gates.c.status).order_by(
                    gates.c.opened_at.desc(), gates.c.gate_id.desc()
                )
            )
        ]
    if any(gate_id == text for gate_id, _, _ in rows):
        return text
    found = [row for row in rows if text and row[0].startswith(text)]
    numbered = _NUMBERED.match(text)
    if not found and numbered is not None:
        head, suffix = numbered["run"], "-" + numbered["n"]
        found = [row for row in rows if row[1].startswith(head) and row[0].endswith(suffix)]
    if len(found) == 1:
        return found[0][0]
    if found:
        pending = [row for row in found if row[2] == GateStatus.PENDING]
        if len({row[1] for row in found}) == 1 and len(pending) == 1:
            return pending[0][0]  # a run's id: its one pending gate
        shown = [g for g, _, _ in (pending or found)][:CANDIDATES]
        which = "pending gates" if pending else "gates"
        raise AmbiguousGateId(
            f"gate id {text!r} names several {which}: {', '.join(shown)} (type more of the id)",
            shown,
        )
    raise GateNotFound(f"no gate {text!r} in audit store {store.shown}{_hint(text, rows)}")


def _hint(text: str, rows: list[tuple[str, str, str]]) -> str:
    """``; did you mean X?`` (the closest gate ids), else the pending gates."""
    close = difflib.get_close_matches(text, [g for g, _, _ in rows], n=3, cutoff=0.6)
    if close:
        return f"; did you mean {' or '.join(close)}?"
    pending = [g for g, _, status in rows if status == GateStatus.PENDING][:CANDIDATES]
    if pending:
        return f"; pending gates: {', '.join(pending)}"
    return "; no gate is pending (converge gates lists them all)"
