"""Signing a decision before it is recorded, here or by an uploaded statement.

Two ways in, one check (:func:`with_signature`, called by
:func:`converge.decisions.decide` once the gate's rules and value hook passed):

- ``signer`` (``converge approve/reject --sign-with KEY`` on the store): the
  statement (:func:`audit.signing._decisions.decision_statement`) is built from the
  decision as it will be recorded and the run's chain head now, and signed here;
  the key must be the decider's registered one.
- ``signed`` (a statement signed elsewhere and uploaded to
  ``POST /api/gates/{id}/signed-decision``; the private key never reaches the
  server or a browser): it must be the decision being recorded, signed at a head
  of the run's chain, with the decider's registered key.

Either way the signed statement rides on the decision (``GateDecision.signature``)
into the chained ``gate_decided`` or ``gate_vote`` event. A refusal is
:class:`SignatureRefused` (HTTP 403), before anything is recorded.
"""

from __future__ import annotations

from typing import Any

from audit.signing import (
    DECISION_TYPE,
    Person,
    Signer,
    canonical,
    chain_holds,
    decision_statement,
    public_key_from_pem,
    statement_problem,
)
from audit.store import SqlRunStore
from converge.errors import SignatureRefused
from engine import GateDecision, GateRecord

__all__ = ["SignatureRefused", "statement_for", "with_signature"]


def statement_for(
    store: SqlRunStore, gate: GateRecord, decision: GateDecision, answer: Any
) -> dict[str, Any]:
    """The unsigned statement of ``decision`` on ``gate`` at the run's chain head now
    (``decision.value``: the content the hook derived from ``answer``)."""
    return decision_statement(
        gate_id=gate.gate_id,
        run_id=gate.run_id,
        head=store.run(gate.run_id).head_hash,
        by=decision.by,
        approved=decision.approved,
        reason=decision.reason,
        value=decision.value,
        answer=answer,
    )


def with_signature(
    store: SqlRunStore,
    gate: GateRecord,
    decision: GateDecision,
    answer: Any,
    who: Person | None,
    *,
    signer: Signer | None = None,
    signed: dict[str, Any] | None = None,
) -> GateDecision:
    """``decision`` carrying its signed statement (unchanged without ``signer`` or
    ``signed``). ``answer`` is the value the decider gave (``decision.value`` is
    what the gate's hook made of it); ``who``: the decider as registered (None:
    not registered), whose public key must be the one that signed. Raises
    :class:`SignatureRefused`."""
    if signer is None and signed is None:
        return decision
    by = decision.by
    if who is None or who.public_key is None:
        raise SignatureRefused(
            f"{by} has no registered public key to check a signed decision against: "
            f"converge user add {by} --public-key FILE"
        )
    if signer is not None:
        if signer.key_id != who.key_id:
            raise SignatureRefused(
                f"gate {gate.gate_id}: the signing key {signer.key_id} is not {by}'s "
                f"registered key ({who.key_id}); nothing was recorded"
            )
        statement = signer.sign(statement_for(store, gate, decision, answer))
        return decision.model_copy(update={"signature": statement})
    assert signed is not None
    statement = dict(signed)
    if statement.get("type") != DECISION_TYPE:
        raise SignatureRefused(f"gate {gate.gate_id}: not a {DECISION_TYPE} statement")
    if canonical(statement.get("answer")) != canonical(answer):
        raise SignatureRefused(f"gate {gate.gate_id}: the statement's answer is not the one given")
    head = statement.get("head")
    earlier = {head} if isinstance(head, str) and chain_holds(store, gate.run_id, head) else set()
    payload = {
        "gate_id": gate.gate_id,
        "by": by,
        "approved": decision.approved,
        "reason": decision.reason,
        "value": decision.value,
    }
    keys = {by: public_key_from_pem(who.public_key)}
    why = statement_problem(statement, payload, gate.run_id, earlier, keys)
    if why is not None:
        raise SignatureRefused(f"{why}; nothing was recorded")
    return decision.model_copy(update={"signature": statement})
