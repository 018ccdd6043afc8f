"""HITL gates: a run paused on one, its compare-and-set decision (chained as a
``gate_decided`` event in the same transaction), and the claim of the run that a
resume makes. Quorum votes on a gate are in :mod:`audit.people._approvals`."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, insert, select, update

from audit.cells import bad_cell, cells, json_cell, unchanged
from audit.core import StoreCore, json_compact
from audit.tables import gates, runs
from audit.trail._checkpoints import put_checkpoint
from audit.trail._events import append, append_checkpointed, locked_run_row
from audit.trail._runs import outcome_values
from audit.trail._store_key import require_key
from audit.writing import grant, read_lease, release, this_writer, writer_alive
from engine.errors import (
    CorruptRow,
    GateAlreadyDecided,
    GateNotFound,
    RunBusy,
    RunFinished,
    StoreError,
)
from engine.status import GateStatus, RunStatus
from engine.stop_categories import RESUMABLE
from engine.store import AuditEvent, BatchItem, Claim, GateRecord, RunOutcome

if TYPE_CHECKING:  # a decision's type only: a reader of gates builds no decision model
    from engine.hitl import GateDecision

_DECIDED = (GateStatus.APPROVED, GateStatus.REJECTED, GateStatus.EXPIRED)
_GOES_ON = frozenset(c.value for c in RESUMABLE)  # categories a stopped run can resume from
_CLAIM_READS = tuple(
    runs.c[c] for c in ["status", "epoch", "last_seq", "pid", "hostname", "stop_kind", "category"]
)
"""The columns of its run a claim reads (and locks)."""


def pause_run(
    store: StoreCore,
    run_id: str,
    events: Sequence[BatchItem],
    outcome: RunOutcome,
    gate: GateRecord,
    checkpoint: dict[str, Any],
) -> None:
    """Write the events, the pending gate, the checkpoint and the ``paused``
    outcome, in one transaction; the run's lease goes with it."""
    store.wait_written(run_id)
    store.leases.drop(run_id)
    with store.transaction() as conn:
        blob = append_checkpointed(store, conn, run_id, events, checkpoint)
        conn.execute(
            insert(gates).values(
                gate_id=gate.gate_id,
                run_id=gate.run_id,
                proposal_id=gate.proposal_id,
                proposal=json_compact(gate.proposal),
                suggestor=gate.suggestor,
                summary=gate.summary,
                cycle=gate.cycle,
                policy=gate.policy,
                status=gate.status,
                opened_at=gate.opened_at or time.time(),
                expires_at=gate.expires_at,
                on_timeout=gate.on_timeout,
                decided_by=gate.decided_by,
                decided_at=gate.decided_at,
                reason=gate.reason,
                extra=json_compact(gate.extra),
            )
        )
        put_checkpoint(store, conn, run_id, checkpoint, blob)
        conn.execute(update(runs).where(runs.c.run_id == run_id).values(**outcome_values(outcome)))
        release(conn, run_id)
    store.leg_ended(run_id)  # a resume, here or elsewhere, claims the run again


def get_gate(store: StoreCore, gate_id: str) -> GateRecord:
    """The gate (raises ``GateNotFound``)."""
    with store.transaction(write=False) as conn:
        row = conn.execute(select(gates).where(gates.c.gate_id == gate_id)).one_or_none()
    if row is None:
        raise GateNotFound(f"no gate {gate_id!r} in audit store {store.shown}")
    return gate_record(row._mapping)


def list_gates(store: StoreCore, pending: bool = False) -> list[GateRecord]:
    """HITL gates, newest first (only ``pending`` ones when asked)."""
    q = select(gates)
    if pending:
        q = q.where(gates.c.status == GateStatus.PENDING)
    q = q.order_by(gates.c.opened_at.desc(), gates.c.gate_id.desc())
    with store.transaction(write=False) as conn:
        return [gate_record(r._mapping) for r in conn.execute(q)]


def decide_gate(store: StoreCore, gate_id: str, decision: GateDecision, status: str) -> GateRecord:
    """Compare-and-set the gate from ``pending`` to ``status`` and chain the decision
    as a ``gate_decided`` event, in one transaction; ``GateAlreadyDecided`` for the
    callers that lose, ``GateNotFound`` for an unknown gate, ``AuditKeyError``
    (nothing written) in a keyed store without its key."""
    require_key(store, f"deciding gate {gate_id}")
    if status not in _DECIDED:
        raise StoreError(f"gate status must be one of {', '.join(_DECIDED)}, got {status!r}")
    with store.transaction() as conn:
        return settle_gate(store, conn, gate_id, decision, status)


def settle_gate(
    store: StoreCore, conn: Connection, gate_id: str, decision: GateDecision, status: str
) -> GateRecord:
    """:func:`decide_gate` in the caller's transaction ``conn``: the gate set from
    ``pending`` to ``status`` (one of approved, rejected, expired) and the
    ``gate_decided`` event chained; the gate as recorded. Raises ``GateNotFound``
    or ``GateAlreadyDecided`` (it was not pending)."""
    now = time.time()
    done = conn.execute(
        update(gates)
        .where(gates.c.gate_id == gate_id, gates.c.status == GateStatus.PENDING)
        .values(status=status, decided_by=decision.by, decided_at=now, reason=decision.reason)
    )
    row = conn.execute(select(gates).where(gates.c.gate_id == gate_id)).one_or_none()
    if row is None:
        raise GateNotFound(f"no gate {gate_id!r} in audit store {store.shown}")
    rec = gate_record(row._mapping)
    if done.rowcount != 1:
        from engine.hitl import iso_utc

        raise GateAlreadyDecided(gate_id, rec.status, rec.decided_by, iso_utc(rec.decided_at))
    # the decision enters the run's chain in the compare-and-set's transaction
    decided = AuditEvent(
        "gate_decided",
        rec.cycle,
        {
            "gate_id": gate_id,
            "approved": decision.approved,
            "status": status,
            "by": decision.by,
            "reason": decision.reason,
            "decided_at": now,
            **({"value": decision.value} if decision.value is not None else {}),
            # the decider's signed statement (audit.signing._decisions)
            **({"signature": decision.signature} if decision.signature else {}),
        },
        now,
    )
    append(store, conn, rec.run_id, [decided])
    return rec


def claim_resume(
    store: StoreCore,
    run_id: str,
    expected_epoch: int | None = None,
    expected_seq: int | None = None,
    events: Sequence[BatchItem] = (),
) -> Claim:
    """Claim the run for this process: one compare-and-set of its row from
    ``paused`` / ``stopped`` (resumably) / ``running`` with a dead writer (crashed)
    / ``queued`` with events (a fork recorded for a worker: ``Engine.record_fork``)
    to ``running`` by this process, bumping its fencing epoch and taking its lease
    (:mod:`audit.writing._lease`): a running run is claimed only once its lease
    expired by the database's clock (or, on this host, its holder died).

    Idempotent by design: the update matches only the epoch and status just read,
    so of racing claimers exactly one changes the row and the others (rowcount 0)
    get ``RunBusy``; with ``expected_epoch`` and ``expected_seq`` (the epoch and
    last seq seen when the caller read the checkpoint) a claim after anyone else's,
    or after anything was recorded since, fails the same way. Raises
    ``RunFinished`` for a stop that leaves nothing to do, ``RunNotFound``,
    ``AuditKeyError`` (nothing written) in a keyed store without its key.
    ``events`` are appended after the claim in the same transaction.
    """
    require_key(store, f"resuming run {run_id}")
    pid, host = this_writer()
    with store.transaction() as conn:
        row = locked_run_row(store, conn, run_id, *_CLAIM_READS)
        was = row.status
        lease = read_lease(conn, run_id)
        if was == RunStatus.RUNNING:
            if lease.held if lease is not None else writer_alive(row.pid, row.hostname):
                raise RunBusy(f"run {run_id} is running: another process is resuming it")
            was = RunStatus.CRASHED  # its writer died (kill -9): take the run over
        elif was == RunStatus.STOPPED and row.category is not None and row.category not in _GOES_ON:
            raise RunFinished(f"run {run_id} already finished ({row.stop_kind})")
        elif was not in (RunStatus.PAUSED, RunStatus.STOPPED) and not (
            was == RunStatus.QUEUED and row.last_seq > 0  # a recorded fork, checkpointed
        ):
            raise RunBusy(f"run {run_id} is {was}: it cannot be claimed")
        if (expected_epoch is not None and row.epoch != expected_epoch) or (
            expected_seq is not None and row.last_seq != expected_seq
        ):
            raise RunBusy(f"run {run_id} was claimed by another process first")
        epoch = row.epoch + 1
        # the lease first: a compare-and-set against the expired lease read above
        grant(
            conn, run_id, epoch, store.leases.seconds, lease if was == RunStatus.CRASHED else None
        )
        done = conn.execute(
            update(runs)
            .where(runs.c.run_id == run_id, *unchanged(runs, row, "epoch", "status", "last_seq"))
            .values(status=RunStatus.RUNNING, pid=pid, hostname=host, epoch=epoch)
        )
        if done.rowcount != 1:
            raise RunBusy(f"run {run_id} was claimed by another process first")
        store.claim_epochs[run_id] = epoch
        store.predicted_heads.pop(run_id, None)
        store.forget_run(run_id)  # the leg reads its head and chunks as they are now
        if events:  # the leg's first events go with its claim: one unit of recovery
            append(store, conn, run_id, events)
    store.claim_epochs[run_id] = epoch
    store.predicted_heads.pop(run_id, None)  # the next write reads the chain head after the claim
    store.leases.hold(run_id, epoch)
    return Claim(run_id, epoch, was, row.pid, row.hostname)


def release_claim(store: StoreCore, claim: Claim) -> None:
    """Give the run back as the claim found it (status, writer and epoch) when the
    resume cannot start: it wrote nothing, so a process that read the run before
    this claim may still claim it; a superseded claim changes nothing. The lease is
    given up (left expired, for a crashed run)."""
    status = RunStatus.RUNNING if claim.was == RunStatus.CRASHED else claim.was
    store.leases.drop(claim.run_id)
    with store.transaction() as conn:
        conn.execute(
            update(runs)
            .where(runs.c.run_id == claim.run_id, runs.c.epoch == claim.epoch)
            .values(status=status, pid=claim.pid, hostname=claim.hostname, epoch=claim.epoch - 1)
        )
        crashed = claim.was == RunStatus.CRASHED
        release(conn, claim.run_id, expire_at=claim.epoch - 1 if crashed else None)
    store.claim_epochs.pop(claim.run_id, None)


_NUMBER = (int, float)
_PROPOSAL_FIELDS: dict[str, tuple[type, ...]] = {
    "key": (str,),
    "confidence": _NUMBER,
    "parents": (list,),
    "id": (str, type(None)),
}
"""The fields of a gate's proposal (``engine.Proposal``) and the JSON types they hold."""

_RULE_FIELDS: dict[str, tuple[type, ...]] = {
    "approvers": (list, type(None)),
    "four_eyes": (bool,),
    "reason_required": (str, type(None)),
    "escalate_after_s": (*_NUMBER, type(None)),
    "escalate_to": (list, type(None)),
    "notify": (list, type(None)),
}
"""The decision rules a gate carries in ``extra["rules"]`` (converge.governance)."""


def _fields_shape(value: dict[str, Any], fields: dict[str, tuple[type, ...]]) -> str | None:
    for name, types in fields.items():
        if name in value and not isinstance(value[name], types):
            return f"{name} is a JSON {type(value[name]).__name__}"
    return None


def _proposal_shape(proposal: dict[str, Any]) -> str | None:
    """Why a gate's proposal cannot be a proposal (a field of the wrong type), or None."""
    if "key" not in proposal or "content" not in proposal:
        return "no key or no content: not a proposal"
    why = _fields_shape(proposal, _PROPOSAL_FIELDS)
    if why is None and not all(isinstance(p, str) for p in proposal.get("parents") or ()):
        why = "parents holds a non-text id"
    return why


def _rules_shape(rules: Any) -> str | None:
    """Why ``extra["rules"]`` cannot be a gate's decision rules, or None."""
    if rules is None:
        return None
    if not isinstance(rules, dict):
        return f"rules is a JSON {type(rules).__name__}"
    return _fields_shape(rules, _RULE_FIELDS)


_GATE_CELLS = tuple(c.name for c in gates.c)
"""The ``gates`` columns, each a :class:`GateRecord` field of its name."""


def gate_record(m: Any) -> GateRecord:
    """A ``gates`` row (its mapping) as a :class:`engine.store.GateRecord`;
    ``CorruptRow`` naming the first cell that cannot be read."""
    where = f"gate {m['gate_id']}"
    bad = bad_cell(gates, m)
    if bad is not None:
        raise CorruptRow("gates", where, *bad)
    proposal, why = json_cell(m["proposal"], dict)
    if why is not None:
        raise CorruptRow("gates", where, "proposal", why)
    why = _proposal_shape(proposal)
    if why is not None:
        raise CorruptRow("gates", where, "proposal", why)
    extra, why = json_cell(m["extra"], dict) if m["extra"] else ({}, None)
    if why is None:
        why = _rules_shape(extra.get("rules"))
    if why is not None:
        raise CorruptRow("gates", where, "extra", why)
    return GateRecord(**{**cells(m, *_GATE_CELLS), "proposal": proposal, "extra": extra})
