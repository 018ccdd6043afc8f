"""A decision on a gate, the one path of every decider (``converge approve`` /
``reject``, the inbox's pages and its JSON API, Python): load, check, record,
resume.

1. :func:`audit.people.decision_case`: the gate, its run's header and the decider
   as the store knows them, read in one transaction;
2. :func:`converge.decisions._checks.check`: who may decide (approvers, four eyes,
   reasons, a known person), the value, the signature; refusals in the access log;
3. :func:`audit.people.record_decision`: the vote (quorum gates), the decision with
   its value and signed statement, and the gate's decided state, in one
   transaction;
4. :func:`converge.decisions._resume.hand_over`: the resume sent to a queue, or
   run here (``Engine.resume`` then records the decision: the compare-and-set of
   racing deciders of which exactly one wins).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from audit.people import Recorded, Vote, decision_case, record_decision, votes
from audit.signing import Signer
from audit.store import SqlRunStore
from converge.decisions._checks import check
from converge.decisions._expiry import Clock, apply_expiry
from converge.decisions._resume import Execute, hand_over
from converge.jobs import Job
from converge.jobs.models import ModelChoice
from converge.run_queue import RunQueue
from engine import ConvergeError, GateDecision, GateExpired, GateRecord, RunResult


@dataclass(frozen=True, slots=True)
class DecisionReport:
    """What one decision did.

    ``gate``: the gate as stored afterwards; ``votes``: who voted (quorum gates);
    ``required``: approvals the gate needs; ``still_needed``: approvals missing
    (0 once decided); ``result``: the run's next stop when the decision resumed it;
    ``job``: the job its run recorded (what the decision was checked against).
    """

    gate: GateRecord
    votes: tuple[Vote, ...]
    required: int
    still_needed: int
    result: RunResult | None
    job: Job | None = None


def decide(
    store: SqlRunStore,
    gate_id: str,
    decision: GateDecision,
    *,
    execute: Execute | None = None,
    clock: Clock = time.time,
    queue: RunQueue | None = None,
    signer: Signer | None = None,
    signed: dict[str, Any] | None = None,
    role: str = "admin",
    models: ModelChoice | None = None,
) -> DecisionReport:
    """Record ``decision`` on a gate and, when it decides the gate, resume the run:
    here (``execute`` builds the job's engine and runs it), or with ``queue`` on a
    worker (the decision recorded first, then the resume sent;
    ``DecisionReport.result`` is then None and this returns at once). ``clock``:
    unix seconds, for the deadline and the vote's time.

    ``signer`` signs the decision as recorded, or ``signed`` is the decider's
    statement signed elsewhere (``decision.value`` then the answer it signed):
    the signed statement goes into the chained decision (:mod:`converge.governance`).
    ``role``: the decider's (a token's), asked of the access policy
    (:mod:`converge.access`); ``admin``, the default, for a caller that holds the
    store itself (the gate's approvers and four eyes still apply). ``models``:
    another model than the run recorded, asked for (``--model``,
    ``--allow-model-change``; :mod:`converge.jobs.models`).

    Raises ``GateNotFound``, ``NotAllowed`` (not among the gate's approvers, or four
    eyes) or ``MissingReason``, ``GateAlreadyDecided`` (decided, or its quorum
    already reached), ``GateExpired`` (past its deadline: its ``on_timeout``
    decision is applied instead), ``DuplicateVote`` (this person voted already),
    :class:`InvalidValue` (``decision.value`` refused by the policy's hook),
    ``ConvergeError`` (an empty ``decision.by``; the run recorded no job),
    ``ResumeError`` or ``RunBusy``; ``AuditKeyError`` (a keyed store without its
    key), ``UnknownPerson`` (people are registered and ``decision.by`` is none of
    them), ``SignatureRefused`` and ``ModelChanged`` (the run would go on with
    another model than it recorded, not asked for), each before anything is recorded.
    """
    if not decision.by.strip():
        raise ConvergeError("a decision needs the name of who decides (empty 'by')")
    now = clock()
    case = decision_case(store, gate_id, decision.by)
    try:
        checked = check(
            store, case, decision, now, signer=signer, signed=signed, role=role, models=models
        )
        if checked.required == 1 and queue is None:
            # nothing to record first: Engine.resume records the decision (the
            # compare-and-set of racing deciders) in its claim's own transaction
            recorded = Recorded(case.gate, (), 1, checked.decision)
        else:
            recorded = record_decision(
                store,
                gate_id,
                checked.decision,
                checked.required,
                now=now,
                settle=queue is not None,
            )
    except GateExpired:
        # past its deadline: its on_timeout decision is applied instead, once
        apply_expiry(store, case.gate, execute, queue=queue)
        raise
    result = hand_over(store, recorded, checked.job, execute=execute, queue=queue)
    gate = recorded.gate if result is None else store.get_gate(gate_id)
    return DecisionReport(
        gate, recorded.votes, recorded.required, recorded.still_needed, result, checked.job
    )


def gate_votes(store: SqlRunStore, gate_id: str) -> list[Vote]:
    """The votes cast on a gate, oldest first."""
    return votes(store, gate_id)
