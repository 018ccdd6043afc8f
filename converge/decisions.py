"""Deciding gates from the application: quorum, deadlines, and the run's recorded job.

One path for every decider (``converge approve``/``reject``, the inbox's pages and
its JSON API), so a decision is recorded the same way whoever makes it:

- a gate whose policy needs one approval is decided by ``Engine.resume`` (the
  store's compare-and-set: of racing deciders exactly one wins);
- a gate with ``approvals_required=N`` counts votes first (``audit.people._approvals``):
  a vote that does not decide is a ``gate_vote`` event in the run's chain; the
  N-th distinct approval or the first rejection becomes the engine's decision;
- a pending gate past its deadline is decided ``expired`` (compare-and-set) with
  its ``on_timeout`` decision and its run resumed, by whatever process applies the
  deadlines on time (``converge serve``, a worker, ``converge gates --expire`` run
  by cron) or the first time anyone decides or resumes it, so the decision is in
  the chain once. Listing gates only lists.

The run resumes in this process from the job it recorded (``converge.jobs``), or,
given a ``queue`` (:class:`converge.run_queue.RunQueue`), on a worker: the decision
is recorded and the resume sent, and the decider gets its answer at once.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from audit.ledger import require_key
from audit.people import Vote, cast_vote, log_access, votes
from audit.signing import Signer
from audit.store import SqlRunStore
from converge.deciders import check_known
from converge.errors import InvalidValue, MissingReason, NotAllowed
from converge.governance import check_decision
from converge.jobs import HitlSpec, Job, job_from_record
from converge.run_queue import RunQueue
from converge.signed_decisions import with_signature
from engine import (
    ConvergeError,
    Engine,
    GateAlreadyDecided,
    GateDecision,
    GateExpired,
    GateRecord,
    RunResult,
)
from engine.hitl import iso_utc
from engine.status import GateStatus
from gates.hitl import ApprovalPolicy

Clock = Callable[[], float]
"""Unix time in seconds (``time.time``); tests inject another to pass a deadline."""

Execute = Callable[[Job, Callable[[Engine], RunResult]], RunResult]
"""How to build a job's engine and run one step of it (the CLI adds a progress bar)."""


def executor_for(store: SqlRunStore) -> Execute:
    """Build the job's engine on ``store`` and run ``step`` on it (no progress display)."""

    def execute(job: Job, step: Callable[[Engine], RunResult]) -> RunResult:
        return step(job.build_engine(store))

    return execute


@dataclass(frozen=True, slots=True)
class DecisionReport:
    """What one decision did.

    ``gate``: the gate as stored afterwards; ``votes``: who voted (quorum gates);
    ``required``: approvals the gate needs; ``still_needed``: approvals missing
    (0 once decided); ``result``: the run's next stop when the decision resumed it.
    """

    gate: GateRecord
    votes: tuple[Vote, ...]
    required: int
    still_needed: int
    result: RunResult | None


def job_of_run(store: SqlRunStore, run_id: str) -> Job:
    """The job the run recorded. Raises ``RunNotFound`` or ``ConvergeError`` (none recorded)."""
    header = store.get_run_header(run_id)
    if not header.job_spec:
        raise ConvergeError(f"run {run_id} recorded no job; resume it from Python instead")
    return job_from_record(header.job_spec)


def policy_spec(job: Job | None, gate: GateRecord) -> HitlSpec | None:
    """The job's ``hitl`` gate spec whose policy opened ``gate`` (None when unknown)."""
    if job is None:
        return None
    for spec in job.spec.gates:
        h = spec.hitl
        # the same name the policy got when the run opened the gate
        if h is not None and ApprovalPolicy(keys=h.keys, name=h.name).name == gate.policy:
            return h
    return None


def approvals_required(job: Job | None, gate: GateRecord) -> int:
    """The quorum of the job's HITL policy that opened ``gate`` (1 when unknown)."""
    spec = policy_spec(job, gate)
    return 1 if spec is None else spec.approvals_required


def checked_value(job: Job | None, gate: GateRecord, decision: GateDecision) -> Any:
    """The content the approved proposal takes for ``decision.value`` (None: unchanged).

    The policy's ``validate_value(value, content)`` hook (a ``module:attr`` in the
    job file) checks the value and returns the content; without a hook the
    content is the value. Raises :class:`InvalidValue` (a rejection with a value,
    or the hook refused it) before anything is recorded.
    """
    if decision.value is None:
        return None
    if not decision.approved:
        raise InvalidValue(f"gate {gate.gate_id}: a value goes with an approval, not a rejection")
    spec = policy_spec(job, gate)
    if spec is None or spec.validate_value is None:
        return decision.value
    assert job is not None  # a spec comes from a job
    hook = job.resolve(spec.validate_value, call=False)
    try:
        return hook(decision.value, gate.proposal.get("content"))
    except (ValueError, TypeError) as exc:
        raise InvalidValue(
            f"gate {gate.gate_id}: value {decision.value!r} refused by {spec.validate_value}: {exc}"
        ) from exc


def is_expired(gate: GateRecord, now: float | None = None) -> bool:
    """True when a pending ``gate`` is past its deadline (``expires_at``)."""
    at = time.time() if now is None else now
    return (
        gate.status == GateStatus.PENDING and gate.expires_at is not None and at > gate.expires_at
    )


def apply_expiry(
    store: SqlRunStore,
    gate: GateRecord,
    execute: Execute | None = None,
    *,
    resume: bool = True,
    queue: RunQueue | None = None,
) -> RunResult | None:
    """Decide an expired gate by its ``on_timeout`` and resume its run, exactly once.

    Returns the run's next stop when this caller won the compare-and-set and the
    run recorded a job; None when another caller expired it first, the run cannot
    be resumed here, or another process claimed it first (the gate is expired all
    the same). With ``resume=False`` only the gate is decided: the caller resumes
    the run itself (``converge resume RUN``, with its own budget); with ``queue``
    the resume is sent there.
    """
    timeout = GateDecision(
        approved=gate.on_timeout == "approve", by="timeout", reason="gate expired"
    )
    require_key(store, f"expiring gate {gate.gate_id}")
    try:
        store.decide_gate(gate.gate_id, timeout, GateStatus.EXPIRED)
    except GateAlreadyDecided:
        return None
    if not resume:
        return None
    if queue is not None:
        queue.send(gate.run_id, "resume")
        return None
    try:
        job = job_of_run(store, gate.run_id)
        run = execute or executor_for(store)
        return run(job, lambda engine: engine.resume_run(gate.run_id))
    except ConvergeError:
        # recorded as expired; `converge resume RUN` applies it later
        return None


def expire_due(
    store: SqlRunStore,
    execute: Execute | None = None,
    clock: Clock = time.time,
    *,
    defer: str | None = None,
    queue: RunQueue | None = None,
) -> list[str]:
    """Apply every pending gate's deadline that passed; the ids of the gates expired
    now. The gates of run ``defer`` are decided but its run is not resumed here;
    with ``queue`` the runs are resumed there (see :func:`apply_expiry`)."""
    now = clock()
    done: list[str] = []
    require_key(store, "applying gate deadlines")
    for gate in store.gates(pending=True):
        if is_expired(gate, now):
            apply_expiry(store, gate, execute, resume=gate.run_id != defer, queue=queue)
            done.append(gate.gate_id)
    return done


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
) -> DecisionReport:
    """Record ``decision`` on a gate and, when it decides the gate, resume the run:
    here, or with ``queue`` on a worker (the decision recorded first, then the
    resume sent; ``DecisionReport.result`` is then None and this returns at once).

    ``signer`` signs the decision as recorded, or ``signed`` is the decider's
    statement signed elsewhere (``decision.value`` then the answer it signed):
    the signed statement goes into the chained decision
    (:mod:`converge.signed_decisions`).

    Raises ``GateNotFound``, ``converge.governance.NotAllowed`` (not among the gate's
    approvers, or four eyes) or ``MissingReason``, ``GateAlreadyDecided`` (decided,
    or its quorum already reached), ``GateExpired`` (past its deadline: its
    ``on_timeout`` decision is applied instead), ``audit.people._approvals.DuplicateVote``
    (this person voted already), :class:`InvalidValue` (``decision.value`` refused by
    the policy's hook), ``ConvergeError`` (the run recorded no job), ``ResumeError`` or ``RunBusy``;
    ``AuditKeyError`` (a keyed store without its key), ``converge.deciders.UnknownPerson``
    (people are registered and ``decision.by`` is none of them) and
    ``converge.signed_decisions.SignatureRefused``, each before anything is recorded.
    """
    if not decision.by.strip():
        raise ConvergeError("a decision needs the name of who decides (empty 'by')")
    require_key(store, f"deciding gate {gate_id}")
    run = execute or executor_for(store)
    gate = store.get_gate(gate_id)
    if is_expired(gate, clock()):
        apply_expiry(store, gate, run, queue=queue)
        raise GateExpired(f"gate {gate_id} expired; decided by on_timeout={gate.on_timeout!r}")
    if gate.status != GateStatus.PENDING:
        raise GateAlreadyDecided(gate_id, gate.status, gate.decided_by, iso_utc(gate.decided_at))
    try:
        check_known(store, decision.by)
        check_decision(store, gate, decision, clock())
    except (NotAllowed, MissingReason) as exc:
        # refused: in the access log, never recorded as a decision
        log_access(store, "decide", "403", name=decision.by, target=gate_id, detail=str(exc))
        raise
    job = job_of_run(store, gate.run_id)
    required = approvals_required(job, gate)
    content = checked_value(job, gate, decision)
    answer = decision.value
    if content is not None:
        decision = decision.model_copy(update={"value": content})
    try:
        decision = with_signature(store, gate, decision, answer, signer=signer, signed=signed)
    except NotAllowed as exc:  # a forged or foreign signature: in the access log too
        log_access(store, "decide", "403", name=decision.by, target=gate_id, detail=str(exc))
        raise
    cast: tuple[Vote, ...] = ()
    final = decision
    if required > 1:
        try:
            outcome = cast_vote(store, gate_id, decision, required, now=clock())
        except GateExpired:
            apply_expiry(store, gate, run, queue=queue)
            raise
        cast = outcome.votes
        if outcome.decision is None:
            now = store.get_gate(gate_id)
            return DecisionReport(now, cast, required, outcome.still_needed, None)
        final = outcome.decision
        if final.approved and decision.value is not None:
            # the deciding approver's answer is the one the proposal takes
            final = final.model_copy(update={"value": decision.value})
        if decision.signature is not None:  # the deciding vote's signed statement
            final = final.model_copy(update={"signature": decision.signature})
    if queue is not None:
        recorded = store.decide_gate(
            gate_id, final, GateStatus.APPROVED if final.approved else GateStatus.REJECTED
        )
        queue.send(gate.run_id, "resume")
        return DecisionReport(recorded, cast, required, 0, None)
    try:
        result = run(job, lambda engine: engine.resume(gate_id, final))
    except GateExpired:
        # the engine found it expired and decided it so: this caller applies it
        # if this fails, it stays recorded as expired; `converge resume RUN` applies it
        with contextlib.suppress(ConvergeError):
            run(job, lambda engine: engine.resume_run(gate.run_id))
        raise
    return DecisionReport(store.get_gate(gate_id), cast, required, 0, result)


def gate_votes(store: SqlRunStore, gate_id: str) -> list[Vote]:
    """The votes cast on a gate, oldest first."""
    return votes(store, gate_id)
