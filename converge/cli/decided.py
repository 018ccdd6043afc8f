"""Which facts of a run a person's decision promoted, and which derive from one:
what ``converge facts`` and ``converge lineage`` show beside them.

A fact promoted by a decision is the proposal a HITL gate held (its provenance's
``proposal_id`` is the gate's), approved (or with the value given), or the
``hitl.rejected`` fact a rejection records (its content names the gate). The gates
are read from the ``gates`` table, which ``converge verify`` checks against the
run's chain.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from audit import SqlRunStore
from audit.queries import read_gates
from engine import Fact, GateRecord
from engine.status import GateStatus

__all__ = ["Decided", "decisions"]


@dataclass(frozen=True, slots=True)
class Decided:
    """One decided gate: its id, status (approved, rejected, expired), who decided
    (None when its deadline did), their reason and when (unix seconds)."""

    gate_id: str
    status: str
    by: str | None
    reason: str | None
    decided_at: float | None

    def to_dict(self) -> dict[str, Any]:
        """``{gate_id, status, by, reason, decided_at}`` (a restricted gate's is cut to
        its existence by the access policy's :class:`converge.access.Sight`)."""
        return {
            "gate_id": self.gate_id,
            "status": self.status,
            "by": self.by,
            "reason": self.reason,
            "decided_at": self.decided_at,
        }

    def text(self, *, hidden: bool = False) -> str:
        """``gate G approved by alice: the reason`` (``gate G (restricted)`` when
        ``hidden`` from whoever reads it)."""
        if hidden:
            return f"gate {self.gate_id} (restricted)"
        who = f" by {self.by}" if self.by else ""
        return f"gate {self.gate_id} {self.status}{who}" + (
            f": {self.reason}" if self.reason else ""
        )


@dataclass(frozen=True, slots=True)
class Decisions:
    """The decisions of a run's facts: ``promoted`` (fact id → the decision that
    promoted it) and ``upstream`` (fact id → the decisions of the facts it derives
    from, nearest first, each once)."""

    promoted: dict[str, Decided]
    upstream: dict[str, list[Decided]]

    def of(self, fact_id: str, hidden: set[str]) -> str:
        """The text beside a fact: its decision, or ``after gate G (approved by ...)``."""
        own = self.promoted.get(fact_id)
        if own is not None:
            return own.text(hidden=own.gate_id in hidden)
        after = self.upstream.get(fact_id, [])
        return "; ".join(
            "after " + d.text(hidden=d.gate_id in hidden).split(": ", 1)[0] for d in after
        )

    def json_of(self, fact_id: str) -> dict[str, Any]:
        """The keys a fact's JSON gets: ``decision`` (promoted by one) or
        ``after_decisions`` (derived from some), nothing otherwise."""
        own = self.promoted.get(fact_id)
        if own is not None:
            return {"decision": own.to_dict()}
        after = self.upstream.get(fact_id)
        return {"after_decisions": [d.to_dict() for d in after]} if after else {}


def decisions(store: SqlRunStore, run_id: str, facts: list[Fact]) -> Decisions:
    """The decisions behind ``facts`` (all the run's, in promotion order: a parent
    comes before the facts derived from it). Raises ``StoreError``."""
    by_proposal: dict[str, Decided] = {}
    by_gate: dict[str, Decided] = {}
    for g in read_gates(store, run_ids=[run_id]):
        if isinstance(g, GateRecord) and g.status != GateStatus.PENDING:
            d = Decided(g.gate_id, str(g.status), g.decided_by, g.reason, g.decided_at)
            by_gate[g.gate_id] = d
            if g.status != GateStatus.REJECTED:
                by_proposal[g.proposal_id] = d
    promoted: dict[str, Decided] = {}
    upstream: dict[str, list[Decided]] = {}
    if not by_gate:
        return Decisions(promoted, upstream)
    for f in facts:
        own = by_proposal.get(f.provenance.proposal_id)
        if own is None and f.key == "hitl.rejected" and isinstance(f.content, dict):
            own = by_gate.get(str(f.content.get("gate_id")))
        if own is not None:
            promoted[f.id] = own
            continue
        found: list[Decided] = []
        for p in f.provenance.parents:
            for d in [promoted[p]] if p in promoted else upstream.get(p, []):
                if d not in found:
                    found.append(d)
        if found:
            upstream[f.id] = found
    return Decisions(promoted, upstream)
