"""Whether a decision may be recorded under its gate's rules: the decider a known
person, allowed by the access policy (:mod:`converge.access`: the approver role, a
place among the gate's approvers at that moment, four eyes), with a reason where the
gate requires one. The same checks hold for the CLI and the inbox
(``converge.decisions``); a refusal is :class:`NotAllowed` (HTTP 403), recorded in
the access log, never as a decision.
"""

from __future__ import annotations

from audit.people import Decider
from audit.store import SqlRunStore
from converge.access import DecisionRules, Person, Role, decision_verdict
from converge.errors import MissingReason, NotAllowed
from converge.governance._deciders import unknown_person
from engine import GateDecision, GateRecord, RunHeader

__all__ = ["check_decision"]


def check_decision(
    store: SqlRunStore,
    gate: GateRecord,
    decision: GateDecision,
    decider: Decider,
    now: float,
    *,
    role: str = Role.ADMIN,
    header: RunHeader | None = None,
) -> None:
    """Refuse a decision the gate's rules do not allow at ``now`` (unix seconds), by
    ``decider`` (``decision.by`` as the store knows them, ``audit.people.Decider``)
    holding ``role`` (a token's; ``admin`` for a caller holding the store itself);
    ``header``: the run's, for the job's ``visible_to``.

    Raises ``UnknownPerson`` (people are registered and the decider is none of
    them), :class:`NotAllowed` naming why (the policy's sentence: the role, who may
    decide, the four-eyes rule) or :class:`MissingReason`. Reads nothing from
    ``store`` (named in messages)."""
    name = decision.by
    if decider.anyone_registered and not decider.known:
        raise unknown_person(store, name)
    person = Person(name, Role(role), decider.groups)
    spec = None if header is None else header.job_spec
    verdict = decision_verdict(gate, person, acted=decider.acted, job_spec=spec, now=now)
    if not verdict.allowed:
        raise NotAllowed(verdict.reason)
    needs = DecisionRules.of(gate).reason_required
    verdict_word = "approve" if decision.approved else "reject"
    if needs in (verdict_word, "both") and not (decision.reason or "").strip():
        raise MissingReason(f"gate {gate.gate_id}: a reason is required to {verdict_word} it")
