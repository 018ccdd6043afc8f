"""A gate's rules, as its policy recorded them (``GateRecord.extra["rules"]``, chained in
its ``gate_opened`` event): who may read and decide it (approvers, people or groups;
after ``escalate_after_s`` its escalation group too), four eyes, required reasons.

From ``gates.hitl.require_approval(approvers=..., four_eyes=..., reason_required=...,
escalate_after_s=..., escalate_to=...)`` or a job file's ``hitl:`` keys. With no
``approvers``, any approver may decide, and whoever sees the run reads the gate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine import GateRecord

__all__ = ["DecisionRules"]


@dataclass(frozen=True, slots=True)
class DecisionRules:
    """A gate's rules (see the module); built by :meth:`of` from the gate record.

    ``approvers``: people and groups who may decide (None: any approver);
    ``four_eyes``: the run's own people may not; ``reason_required``: ``reject``,
    ``approve``, ``both`` or ``never``; ``escalate_after_s``: seconds after the gate
    opened when ``escalate_to`` may decide too.
    """

    approvers: frozenset[str] | None = None
    four_eyes: bool = False
    reason_required: str = "reject"
    escalate_after_s: float | None = None
    escalate_to: frozenset[str] = frozenset()

    @staticmethod
    def of(gate: GateRecord) -> DecisionRules:
        """The rules recorded with ``gate`` (defaults for a gate that has none)."""
        raw: dict[str, Any] = dict(gate.extra.get("rules") or {})
        approvers = raw.get("approvers")
        after = raw.get("escalate_after_s")
        return DecisionRules(
            approvers=None if approvers is None else frozenset(map(str, approvers)),
            four_eyes=bool(raw.get("four_eyes", False)),
            reason_required=str(raw.get("reason_required") or "reject"),
            escalate_after_s=None if after is None else float(after),
            escalate_to=frozenset(map(str, raw.get("escalate_to") or ())),
        )

    def escalated(self, gate: GateRecord, now: float) -> bool:
        """True once the gate has waited ``escalate_after_s`` seconds (unix ``now``)."""
        return self.escalate_after_s is not None and now >= gate.opened_at + self.escalate_after_s

    def approvers_at(self, gate: GateRecord, now: float) -> frozenset[str] | None:
        """The people and groups who may decide at ``now`` (None: any approver)."""
        if self.approvers is None:
            return None
        if self.escalated(gate, now):
            return self.approvers | self.escalate_to
        return self.approvers
