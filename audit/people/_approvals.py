"""Quorum on a HITL gate: each person's approval or rejection, counted in the store.

A gate with ``approvals_required=N`` (``gates.hitl.require_approval``) is decided by
the vote that makes it decisive: the N-th distinct approval, or the first
rejection. Votes are cast in one transaction that locks the gate row, so of
racing voters exactly one casts the deciding vote; a vote on a gate whose votes
are already decisive is refused as ``GateAlreadyDecided`` (unless it repeats the
deciding vote of a gate still pending: see :func:`cast_vote`), a second vote by the
same person as :class:`DuplicateVote`. Each vote that does not decide is a
``gate_vote`` event in the run's hash chain; the deciding one becomes the
engine's ``gate_decided`` (``by`` = every approver, in order) when the caller
resumes the run with :attr:`VoteOutcome.decision`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Integer, Row, insert, select, type_coerce

from audit.cells import bad_cell
from audit.people._schema import ensure_inbox_tables, inbox_readable
from audit.store import SqlRunStore
from audit.tables import gate_votes, gates
from audit.trail import append, gate_record
from engine.errors import (
    CorruptRow,
    DuplicateVote,
    GateAlreadyDecided,
    GateExpired,
    GateNotFound,
)
from engine.hitl import GateDecision, iso_utc
from engine.status import GateStatus
from engine.store import AuditEvent, GateRecord

MAX_REASON_CHARS = 10_000
"""The longest reason a vote may carry (characters)."""


@dataclass(frozen=True, slots=True)
class Vote:
    """One person's vote on a gate: ``approved`` or not, ``reason``, ``ts`` (unix seconds)."""

    voter: str
    approved: bool
    reason: str | None
    ts: float


class Tally:
    """The ``votes`` cast on a gate, the approvals it ``required`` and its
    ``decision`` (None while a quorum is short): the base of the records that
    report a vote's effect, which declare these fields."""

    __slots__ = ()
    votes: tuple[Vote, ...]
    required: int
    decision: GateDecision | None

    @property
    def approvals(self) -> int:
        """How many distinct people approved so far."""
        return sum(1 for v in self.votes if v.approved)

    @property
    def still_needed(self) -> int:
        """Approvals still needed to approve the gate (0 once decided)."""
        return 0 if self.decision is not None else max(self.required - self.approvals, 0)


@dataclass(frozen=True, slots=True)
class VoteOutcome(Tally):
    """The gate's votes after one more: ``decision`` is set when this vote decided it."""

    gate_id: str
    votes: tuple[Vote, ...]
    required: int
    decision: GateDecision | None


def _decision(votes: list[Vote], required: int) -> tuple[GateDecision, Vote] | None:
    """The decision ``votes`` make and the vote that made it (None: not decisive yet)."""
    rejection = next((v for v in votes if not v.approved), None)
    if rejection is not None:
        return GateDecision.reject(by=rejection.voter, reason=rejection.reason), rejection
    approvers = [v for v in votes if v.approved]
    if len(approvers) >= required:
        by = ", ".join(v.voter for v in approvers)
        return GateDecision.approve(by=by, reason=approvers[-1].reason), approvers[-1]
    return None


def deciding_vote(cast: Sequence[Vote], required: int) -> Vote | None:
    """The vote among ``cast`` (oldest first) that decided a gate needing ``required``
    approvals: the ``required``-th approval or the first rejection (None: undecided)."""
    done = _decision(list(cast), required)
    return None if done is None else done[1]


VOTE_CELLS = (
    *(c for c in gate_votes.columns if c.name != "approved"),
    # as stored: SQLAlchemy's Boolean reads any text of a SQLite cell as True
    type_coerce(gate_votes.c.approved, Integer).label("approved"),
)
"""The columns of ``gate_votes`` as :func:`vote_of` reads them."""


def vote_of(r: Row[Any]) -> Vote:
    """A :class:`Vote` from a ``gate_votes`` row; ``CorruptRow`` naming the first
    cell not of its column's type (``approved`` neither true nor false included)."""
    m = r._mapping
    bad = bad_cell(gate_votes, m)
    if bad is None and m["approved"] not in (True, False):  # 1 and 0 are, on SQLite
        bad = ("approved", f"{m['approved']!r:.40} where true or false is expected")
    if bad is not None:
        raise CorruptRow("gate_votes", f"gate {m['gate_id']} vote by {m['voter']}", *bad)
    return Vote(m["voter"], bool(m["approved"]), m["reason"], m["ts"])


def votes(store: SqlRunStore, gate_id: str) -> list[Vote]:
    """The votes cast on ``gate_id``, oldest first (empty for a gate without quorum);
    ``CorruptRow`` for a vote that cannot be read."""
    if not inbox_readable(store):
        return []
    with store.transaction(write=False) as conn:
        rows = conn.execute(
            select(*VOTE_CELLS)
            .where(gate_votes.c.gate_id == gate_id)
            .order_by(gate_votes.c.ts, gate_votes.c.voter)
        ).all()
    return [vote_of(r) for r in rows]


def votes_on(
    store: SqlRunStore,
    gate_ids: Sequence[str],
    corrupt: dict[str, CorruptRow] | None = None,
) -> dict[str, list[Vote]]:
    """The votes cast on each of ``gate_ids`` (oldest first; gates without votes are
    absent), read in a few queries whatever their number (a page of gates).

    A vote that cannot be read raises ``CorruptRow``, or, given ``corrupt``, is
    left out and its error kept there under its gate's id (the first one of each)."""
    if not inbox_readable(store):
        return {}
    out: dict[str, list[Vote]] = {}
    ids = list(dict.fromkeys(gate_ids))
    with store.transaction(write=False) as conn:
        for i in range(0, len(ids), VOTES_PER_QUERY):
            rows = conn.execute(
                select(*VOTE_CELLS)
                .where(gate_votes.c.gate_id.in_(ids[i : i + VOTES_PER_QUERY]))
                .order_by(gate_votes.c.ts, gate_votes.c.voter)
            ).all()
            for r in rows:
                try:
                    vote = vote_of(r)
                except CorruptRow as exc:
                    if corrupt is None:
                        raise
                    corrupt.setdefault(str(r.gate_id), exc)
                    continue
                out.setdefault(r.gate_id, []).append(vote)
    return out


VOTES_PER_QUERY = 500
"""Gate ids per query of :func:`votes_on` (well under every database's bound)."""


def cast_vote(
    store: SqlRunStore,
    gate_id: str,
    decision: GateDecision,
    required: int,
    *,
    now: float | None = None,
) -> VoteOutcome:
    """Record ``decision.by``'s vote on a pending gate needing ``required`` approvals.

    ``now``: unix seconds (default the current time), checked against the gate's
    deadline. Raises ``GateNotFound``, ``GateAlreadyDecided`` (decided, or its
    votes already decisive), ``GateExpired`` (past its deadline: nothing
    recorded), :class:`DuplicateVote`, ``ValueError`` for a ``required`` < 1, or
    ``StoreError``.

    The person whose vote decided a gate that is still pending (their process died
    before it resumed the run) may repeat that vote: nothing new is recorded, and
    the outcome carries the recorded decision for the caller to apply.
    """
    with pending_gate(store, gate_id, required, now) as (conn, gate, at):
        return vote_in(store, conn, gate, decision, required, at)


@contextmanager
def pending_gate(
    store: SqlRunStore, gate_id: str, required: int, now: float | None
) -> Iterator[tuple[Connection, GateRecord, float]]:
    """A write transaction deciding the gate ``gate_id`` that needs ``required``
    approvals: ``(conn, gate, at)``, the gate locked in it (:func:`locked_pending_gate`)
    and ``at``, ``now`` or the current time (unix seconds). Raises ``ValueError`` for a
    ``required`` < 1, and as :func:`locked_pending_gate`."""
    if required < 1:
        raise ValueError(f"required must be >= 1, got {required}")
    ensure_inbox_tables(store)
    at = time.time() if now is None else now
    with store.transaction() as conn:
        yield conn, locked_pending_gate(store, conn, gate_id, at), at


def locked_pending_gate(
    store: SqlRunStore, conn: Connection, gate_id: str, at: float
) -> GateRecord:
    """The gate, its row locked in the caller's transaction ``conn``, pending and not
    past its deadline at ``at`` (unix seconds). Raises ``GateNotFound``,
    ``GateAlreadyDecided`` or ``GateExpired``."""
    row = conn.execute(
        select(gates).where(gates.c.gate_id == gate_id).with_for_update()
    ).one_or_none()
    if row is None:
        raise GateNotFound(f"no gate {gate_id!r} in audit store {store.shown}")
    gate = gate_record(row._mapping)
    if gate.status != GateStatus.PENDING:
        raise GateAlreadyDecided(gate_id, gate.status, gate.decided_by, iso_utc(gate.decided_at))
    if gate.expires_at is not None and at > gate.expires_at:
        raise GateExpired(f"gate {gate_id} expired at {iso_utc(gate.expires_at)}")
    return gate


def vote_in(
    store: SqlRunStore,
    conn: Connection,
    gate: GateRecord,
    decision: GateDecision,
    required: int,
    at: float,
) -> VoteOutcome:
    """:func:`cast_vote` on ``gate`` (locked by :func:`locked_pending_gate`) in the
    caller's transaction ``conn``, the vote dated ``at`` (unix seconds); a vote that
    does not decide the gate is chained as a ``gate_vote`` event. Raises
    ``GateAlreadyDecided`` (its votes already decisive) or :class:`DuplicateVote`."""
    gate_id = gate.gate_id
    cast = [
        vote_of(r)
        for r in conn.execute(
            select(*VOTE_CELLS)
            .where(gate_votes.c.gate_id == gate_id)
            .order_by(gate_votes.c.ts, gate_votes.c.voter)
        )
    ]
    done = _decision(cast, required)
    if done is not None:
        decided, deciding = done
        if deciding.voter == decision.by and deciding.approved == decision.approved:
            # this person's deciding vote is recorded but the gate is still
            # pending: the process that cast it died before resuming the run;
            # repeating the vote lets the caller apply the decision
            return VoteOutcome(gate_id, tuple(cast), required, decided)
        status = GateStatus.APPROVED if decided.approved else GateStatus.REJECTED
        raise GateAlreadyDecided(gate_id, status, decided.by, iso_utc(cast[-1].ts))
    if any(v.voter == decision.by for v in cast):
        raise DuplicateVote(gate_id, decision.by)
    vote = Vote(decision.by, decision.approved, decision.reason, at)
    conn.execute(
        insert(gate_votes).values(
            gate_id=gate_id, voter=vote.voter, approved=vote.approved, reason=vote.reason, ts=at
        )
    )
    cast.append(vote)
    done = _decision(cast, required)
    if done is None:
        payload = {
            "gate_id": gate_id,
            "by": vote.voter,
            "approved": vote.approved,
            "reason": vote.reason,
            "approvals": sum(1 for v in cast if v.approved),
            "required": required,
        }
        if vote.approved and decision.value is not None:
            payload["value"] = decision.value
        if decision.signature:  # the voter's signed statement (audit.signing._decisions)
            payload["signature"] = decision.signature
        append(store, conn, gate.run_id, [AuditEvent("gate_vote", gate.cycle, payload, at)])
    return VoteOutcome(gate_id, tuple(cast), required, None if done is None else done[0])
