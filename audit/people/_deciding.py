"""A decision on a gate as the store sees it: what deciding needs, read in one
transaction (:func:`decision_case`), and the decision recorded in one
(:func:`record_decision`).

The application (``converge.decisions``) checks who may decide between the two:
the gate's rules against :class:`Decider`, the person the decision names as this
store knows them. A refusal is written to the access log
(:func:`audit.people._people.log_access`) and nothing else. The recording locks the
gate's row, so of racing deciders exactly one decides it; a quorum vote, the
deciding decision (with the decider's signed statement and value) and the gate's
decided state are one unit.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, select

from audit.ledger import require_key
from audit.people._approvals import Tally, Vote, pending_gate, vote_in
from audit.people._people import actors_in, groups_in, holds_token_or_group
from audit.signing import Person, anyone_in, person_in, ready_to_read
from audit.store import SqlRunStore
from audit.tables import api_tokens, gates
from audit.trail import gate_record, read_header, settle_gate
from engine.errors import GateNotFound
from engine.hitl import GateDecision
from engine.status import GateStatus
from engine.store import GateRecord, RunHeader

__all__ = ["Decider", "DecisionCase", "Recorded", "decision_case", "record_decision"]


@dataclass(frozen=True, slots=True)
class Decider:
    """The person a decision names, as the store knows them when it is made.

    ``anyone_registered``: people are registered (``converge user add``), so a
    decider must be one of them; ``known``: ``name`` is registered, holds a token
    that is not revoked, or is in a group; ``groups``: the groups they are in;
    ``acted``: they submitted, ran or resumed the gate's run; ``person``: their
    registration (with the public key their signed decisions are checked against),
    None when not registered.
    """

    name: str
    anyone_registered: bool
    known: bool
    groups: frozenset[str]
    acted: bool
    person: Person | None


@dataclass(frozen=True, slots=True)
class DecisionCase:
    """What deciding a gate starts from: the ``gate``, its run's ``header`` (the job
    it recorded) and the ``decider``."""

    gate: GateRecord
    header: RunHeader
    decider: Decider


def decision_case(store: SqlRunStore, gate_id: str, name: str) -> DecisionCase:
    """The gate ``gate_id``, its run's header and ``name`` as a :class:`Decider`, read
    in one transaction.

    Raises ``AuditKeyError`` (a keyed store without its key: nothing may be
    recorded), ``GateNotFound``, ``RunNotFound``, ``CorruptRow`` or ``TamperedRow``
    (the run's header), ``StoreError``.
    """
    require_key(store, f"deciding gate {gate_id}")
    registry = ready_to_read(store)
    # a store the inbox never used has none of its tables: nobody is known there,
    # and reading the case creates nothing (the decision writes what it needs)
    inbox = store.has_table(api_tokens.name)
    with store.transaction(write=False) as conn:
        row = conn.execute(select(gates).where(gates.c.gate_id == gate_id)).one_or_none()
        if row is None:
            raise GateNotFound(f"no gate {gate_id!r} in audit store {store.shown}")
        gate = gate_record(row._mapping)
        header = read_header(store, conn, gate.run_id)
        decider = _decider(conn, name, gate.run_id, registry, inbox)
    return DecisionCase(gate, header, decider)


def _decider(conn: Connection, name: str, run_id: str, registry: bool, inbox: bool) -> Decider:
    """``name`` as the store knows them (``registry``: the people table exists;
    ``inbox``: the inbox's tables exist)."""
    registered = person_in(conn, name) if registry else None
    return Decider(
        name=name,
        anyone_registered=registry and anyone_in(conn),
        known=registered is not None or (inbox and holds_token_or_group(conn, name)),
        groups=frozenset(groups_in(conn, name)) if inbox else frozenset(),
        acted=inbox and name in actors_in(conn, run_id),
        person=registered,
    )


@dataclass(frozen=True, slots=True)
class Recorded(Tally):
    """What :func:`record_decision` recorded: the ``gate`` as stored afterwards, the
    ``votes`` cast on it (a quorum gate's; empty otherwise), the ``approvals`` it
    needs, and ``decision``: the gate's decision when this one decided it (a
    quorum's: every approver, or the rejection), None while a quorum is short."""

    gate: GateRecord
    votes: tuple[Vote, ...]
    required: int
    decision: GateDecision | None


def record_decision(
    store: SqlRunStore,
    gate_id: str,
    decision: GateDecision,
    required: int = 1,
    *,
    now: float | None = None,
    settle: bool = True,
) -> Recorded:
    """Record ``decision`` (its value and signed statement with it) on the pending
    gate ``gate_id`` needing ``required`` approvals, in one transaction.

    A quorum gate (``required`` > 1) counts the vote (``audit.people._approvals``:
    a vote that does not decide is a chained ``gate_vote``); when the decision
    decides the gate and ``settle`` is true, the gate's decided state and its
    ``gate_decided`` event are written in the same transaction. With ``settle``
    false the gate stays pending: the caller hands the decision to
    ``Engine.resume``, which records it. ``now``: unix seconds of the vote, checked
    against the gate's deadline.

    Raises ``GateNotFound``, ``GateAlreadyDecided`` (decided, or its votes already
    decisive), ``GateExpired`` (nothing recorded), ``DuplicateVote``, ``ValueError``
    for a ``required`` < 1, ``StoreError``.
    """
    with pending_gate(store, gate_id, required, now) as (conn, gate, at):
        cast: tuple[Vote, ...] = ()
        final: GateDecision | None = decision
        if required > 1:
            outcome = vote_in(store, conn, gate, decision, required, at)
            cast, final = outcome.votes, _deciding(outcome.decision, decision)
        if final is not None and settle:
            status = GateStatus.APPROVED if final.approved else GateStatus.REJECTED
            gate = settle_gate(store, conn, gate_id, final, status)
    return Recorded(gate, cast, required, final)


def _deciding(decided: GateDecision | None, vote: GateDecision) -> GateDecision | None:
    """A quorum's decision ``decided`` (None: not yet) with the deciding ``vote``'s
    value (the answer the approved proposal takes) and signed statement."""
    if decided is None:
        return None
    if decided.approved and vote.value is not None:
        decided = decided.model_copy(update={"value": vote.value})
    if vote.signature is not None:
        decided = decided.model_copy(update={"signature": vote.signature})
    return decided
