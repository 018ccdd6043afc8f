"""What the job a run recorded says about its gates: the job itself, the HITL spec
that opened a gate, its quorum and the check of a value given with an approval."""

from __future__ import annotations

from typing import Any

from audit.store import SqlRunStore
from converge.errors import InvalidValue
from converge.jobs import HitlSpec, Job, job_from_record
from engine import ConvergeError, GateDecision, GateRecord, RunHeader
from gates.hitl import ApprovalPolicy


def job_of_run(store: SqlRunStore, run_id: str) -> Job:
    """The job the run recorded. Raises ``RunNotFound`` or ``ConvergeError`` (none recorded)."""
    return recorded_job(store.get_run_header(run_id))


def recorded_job(header: RunHeader) -> Job:
    """The job of a run's ``header``. Raises ``ConvergeError`` when it recorded none."""
    if not header.job_spec:
        raise ConvergeError(f"run {header.run_id} recorded no job; resume it from Python instead")
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
