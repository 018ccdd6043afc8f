"""Whether a decision may be recorded, before anything is: the gate still pending
and within its deadline, the decider someone the store knows and allowed by the
gate's rules (approvers, four eyes, reasons: :mod:`converge.governance`), the
value given checked by the policy's hook, the signed statement the decider's.

A refusal by the rules or a refused signature is written to the access log (HTTP
403 or 422 to the inbox), never as a decision.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from audit.people import DecisionCase, log_access
from audit.signing import Signer
from audit.store import SqlRunStore
from converge.decisions._expiry import is_expired
from converge.decisions._policy import checked_value, policy_spec, recorded_job
from converge.errors import MissingReason, NotAllowed
from converge.governance import check_decision, with_signature
from converge.jobs import Job
from converge.jobs.models import ModelChoice
from engine import GateAlreadyDecided, GateDecision, GateExpired
from engine.hitl import iso_utc
from engine.status import GateStatus


@dataclass(frozen=True, slots=True)
class Checked:
    """A decision that may be recorded: ``decision`` as it will be (``value``: the
    content the gate's hook made of the answer; its signed statement), the ``job``
    its run recorded and the approvals its gate's policy ``required``."""

    decision: GateDecision
    job: Job
    required: int


def check(
    store: SqlRunStore,
    case: DecisionCase,
    decision: GateDecision,
    now: float,
    *,
    signer: Signer | None = None,
    signed: dict[str, Any] | None = None,
    role: str = "admin",
    models: ModelChoice | None = None,
) -> Checked:
    """``decision`` on ``case`` at ``now`` (unix seconds), checked and completed;
    ``role``: the decider's (a token's; ``admin`` for a caller holding the store).

    Raises, in this order: ``GateExpired`` (past its deadline: the caller applies
    its ``on_timeout``), ``GateAlreadyDecided``, ``UnknownPerson``, ``NotAllowed``
    or ``MissingReason`` (in the access log), ``ConvergeError`` (the run recorded
    no job), ``ModelChanged`` (the run would go on with another model than it
    recorded and ``models`` does not ask for it), :class:`InvalidValue`,
    ``SignatureRefused`` (in the access log).
    """
    gate = case.gate
    if is_expired(gate, now):
        raise GateExpired(f"gate {gate.gate_id} expired; decided by on_timeout={gate.on_timeout!r}")
    if gate.status != GateStatus.PENDING:
        raise GateAlreadyDecided(
            gate.gate_id, gate.status, gate.decided_by, iso_utc(gate.decided_at)
        )
    try:
        check_decision(store, gate, decision, case.decider, now, role=role, header=case.header)
    except (NotAllowed, MissingReason) as exc:
        _refused(store, decision, gate.gate_id, exc)
        raise
    job = recorded_job(case.header)
    job.model_choice = models or ModelChoice()
    job.agent_models()  # the models the run goes on with: ModelChanged before any record
    spec = policy_spec(job, gate)
    answer = decision.value
    if answer is not None:
        content = checked_value(job, gate, decision)
        if content is not None:
            decision = decision.model_copy(update={"value": content})
    if signer is not None or signed is not None:
        try:
            who = case.decider.person
            decision = with_signature(
                store, gate, decision, answer, who, signer=signer, signed=signed
            )
        except NotAllowed as exc:  # a forged or foreign signature: in the access log too
            _refused(store, decision, gate.gate_id, exc)
            raise
    return Checked(decision, job, 1 if spec is None else spec.approvals_required)


def _refused(store: SqlRunStore, decision: GateDecision, gate_id: str, why: Exception) -> None:
    """The refusal in the access log: never recorded as a decision."""
    log_access(store, "decide", "403", name=decision.by, target=gate_id, detail=str(why))
