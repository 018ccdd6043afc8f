"""Who may see and decide a gate: approvers, escalation, four eyes, required reasons.

A gate carries the rules its policy gave it (``GateRecord.extra["rules"]``, from
``gates.hitl.require_approval(approvers=..., four_eyes=..., reason_required=...,
escalate_after_s=..., escalate_to=...)`` or the job file's ``hitl:`` keys), chained
in its ``gate_opened`` event. With no ``approvers`` any approver may decide, as
before. Approvers name people or groups (``audit.people``); after
``escalate_after_s`` the approvers widen to ``escalate_to``. A four-eyes gate
refuses whoever submitted, ran or resumed the run. The same checks hold for the
CLI and the inbox (``converge.decisions``); a refusal is :class:`NotAllowed`
(HTTP 403), recorded in the access log, never as a decision.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from audit.people import Decider, groups_of
from audit.store import SqlRunStore
from converge.errors import MissingReason, NotAllowed
from converge.governance._deciders import unknown_person
from engine import GateDecision, GateRecord


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


def _named(store: SqlRunStore, name: str, allowed: frozenset[str]) -> bool:
    return name in allowed or bool(groups_of(store, name) & allowed)


def may_decide(store: SqlRunStore, gate: GateRecord, name: str, now: float | None = None) -> bool:
    """Whether ``name`` is among the gate's approvers at ``now`` (unix seconds)."""
    allowed = DecisionRules.of(gate).approvers_at(gate, time.time() if now is None else now)
    return allowed is None or _named(store, name, allowed)


def may_see(store: SqlRunStore, gate: GateRecord, name: str, now: float | None = None) -> bool:
    """Whether ``name`` may see the gate: its approvers (escalation included) and, for
    a gate without named approvers, everyone with a token."""
    rules = DecisionRules.of(gate)
    if rules.approvers is None:
        return True
    return _named(store, name, rules.approvers | rules.escalate_to) or may_decide(
        store, gate, name, now
    )


def check_decision(
    store: SqlRunStore, gate: GateRecord, decision: GateDecision, decider: Decider, now: float
) -> None:
    """Refuse a decision the gate's rules do not allow at ``now`` (unix seconds), by
    ``decider`` (``decision.by`` as the store knows them, ``audit.people.Decider``).

    Raises ``UnknownPerson`` (people are registered and the decider is none of
    them), :class:`NotAllowed` naming why (who may decide, the four-eyes rule) or
    :class:`MissingReason`. Reads nothing from ``store`` (named in messages)."""
    name = decision.by
    if decider.anyone_registered and not decider.known:
        raise unknown_person(store, name)
    rules = DecisionRules.of(gate)
    if rules.approvers is not None:
        allowed = rules.approvers_at(gate, now) or frozenset()
        if name not in allowed and not decider.groups & allowed:
            who = ", ".join(sorted(allowed))
            raise NotAllowed(f"{name} may not decide gate {gate.gate_id}: its approvers are {who}")
    if rules.four_eyes and decider.acted:
        raise NotAllowed(
            f"{name} may not decide gate {gate.gate_id}: four eyes, and {name} submitted "
            "or resumed its run; another person must decide"
        )
    needs = rules.reason_required
    verdict = "approve" if decision.approved else "reject"
    if needs in (verdict, "both") and not (decision.reason or "").strip():
        raise MissingReason(f"gate {gate.gate_id}: a reason is required to {verdict} it")
