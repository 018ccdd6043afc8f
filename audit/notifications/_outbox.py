"""Gate notifications, on the store's side: the outbox of their deliveries.

One row of ``notification_deliveries`` per (gate, event, sink): ``opened``,
``escalated``, ``decided`` or ``expired`` told to ``webhook:URL`` or
``email:ADDRESS``. A process *claims* the deliveries it is about to make by
inserting their rows as ``sending`` (an insert that does nothing when the row
exists), so of processes racing over the same gate exactly one sends each
notification; it then records each attempt (how many, the last HTTP status or
SMTP answer, when) and the outcome (``delivered`` or ``failed``). A claim whose
process died is taken over after :data:`LEASE_S` seconds, so nothing claimed is
lost. A gate's escalation is recorded once: its ``(gate, escalated, chain)`` row
and a ``gate_escalated`` event in the run's hash chain, in one transaction.

The table is created on first use, like the inbox's, so a store of an earlier
version gains it without a migration. The sending itself is in
:mod:`converge.notifications`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, and_, exists, not_, or_, select, update

from audit.cells import bad_cell
from audit.ledger import require_key
from audit.store import SqlRunStore
from audit.tables import NOTIFICATION_TABLES, gates, notification_deliveries
from audit.trail import append, gate_record
from audit.writing import this_writer
from engine.errors import CorruptRow
from engine.status import GateStatus
from engine.store import AuditEvent, GateRecord

EVENTS = ("opened", "escalated", "decided", "expired")
"""The events of a gate that are notified, in the order they happen."""

FINAL_EVENTS = ("decided", "expired")
"""The events after which a gate has nothing more to notify."""

CHAIN_SINK = "chain"
"""The sink of a gate's escalation record: the ``gate_escalated`` event in its run's chain."""

SENDING, DELIVERED, FAILED, RECORDED = "sending", "delivered", "failed", "recorded"
"""A delivery's status: claimed and being sent, sent, given up, or (``chain``) recorded."""

LEASE_S = 120.0
"""Seconds after which a delivery still ``sending`` is taken over (its process died)."""


@dataclass(frozen=True, slots=True)
class Delivery:
    """One notification of a gate's ``event`` to one ``sink`` and what became of it.

    ``status`` is ``sending``, ``delivered``, ``failed`` or ``recorded``;
    ``attempts`` how many sends were tried; ``answer`` the last HTTP status or
    SMTP answer, or why nothing was sent; ``first_at`` when it was first claimed,
    ``last_at`` when it was last tried (unix seconds, None before any attempt).
    """

    gate_id: str
    event: str
    sink: str
    run_id: str
    status: str
    attempts: int
    answer: str | None
    first_at: float
    last_at: float | None

    def to_dict(self) -> dict[str, Any]:
        """The delivery as a JSON-ready dict (for ``converge gates GATE --history``)."""
        return {
            "gate_id": self.gate_id,
            "event": self.event,
            "sink": self.sink,
            "run_id": self.run_id,
            "status": self.status,
            "attempts": self.attempts,
            "answer": self.answer,
            "first_at": self.first_at,
            "last_at": self.last_at,
        }


def ensure_notification_tables(store: SqlRunStore) -> None:
    """Create ``notification_deliveries`` when missing (once per store object).

    Raises ``StoreError`` when the database fails.
    """
    store.ensure_tables(NOTIFICATION_TABLES, 714525)


def _delivery(m: Any) -> Delivery:
    return Delivery(
        gate_id=m["gate_id"],
        event=m["event"],
        sink=m["sink"],
        run_id=m["run_id"],
        status=m["status"],
        attempts=int(m["attempts"]),
        answer=m["answer"],
        first_at=m["first_at"],
        last_at=m["last_at"],
    )


def deliveries(
    store: SqlRunStore, gate_id: str, corrupt: list[CorruptRow] | None = None
) -> list[Delivery]:
    """The notifications of ``gate_id`` so far, in the order of its events (empty
    for a gate without sinks, or an unknown one). Raises ``StoreError``, and
    ``CorruptRow`` for a row that cannot be read, or, given ``corrupt``, leaves
    it out and adds its error there."""
    ensure_notification_tables(store)
    nd = notification_deliveries
    with store.transaction(write=False) as conn:
        rows = conn.execute(
            select(nd).where(nd.c.gate_id == gate_id).order_by(nd.c.first_at, nd.c.sink)
        ).all()
    found: list[Delivery] = []
    for r in rows:
        bad = bad_cell(nd, r._mapping)
        if bad is None and r.event not in EVENTS:
            bad = ("event", f"{r.event!r:.40} is no gate event")
        if bad is None:
            found.append(_delivery(r._mapping))
            continue
        error = CorruptRow(nd.name, f"gate {gate_id} notification", *bad)
        if corrupt is None:
            raise error
        corrupt.append(error)
    return sorted(found, key=lambda d: (EVENTS.index(d.event), d.first_at, d.sink))


def gates_to_notify(store: SqlRunStore) -> list[GateRecord]:
    """The gates that may have a notification due, oldest first: those whose rules
    name a sink or an escalation (a text prefilter; the caller reads the rules) and
    that are pending, or have no delivery of their final event yet, or one still
    being sent. A gate whose final event was told to its sinks is not read again."""
    ensure_notification_tables(store)
    nd = notification_deliveries
    named = or_(
        gates.c.extra.like('%"webhook"%'),
        gates.c.extra.like('%"email"%'),
        and_(
            gates.c.extra.like('%"escalate_after_s":%'),
            not_(gates.c.extra.like('%"escalate_after_s":null%')),
        ),
    )
    final_told = exists().where(nd.c.gate_id == gates.c.gate_id, nd.c.event.in_(FINAL_EVENTS))
    in_flight = exists().where(nd.c.gate_id == gates.c.gate_id, nd.c.status == SENDING)
    q = (
        select(gates)
        .where(named, or_(gates.c.status == GateStatus.PENDING, not_(final_told), in_flight))
        .order_by(gates.c.opened_at, gates.c.gate_id)
    )
    with store.transaction(write=False) as conn:
        return [gate_record(r._mapping) for r in conn.execute(q)]


def recorded(store: SqlRunStore, gate_ids: Sequence[str]) -> dict[str, list[Delivery]]:
    """The deliveries of each of ``gate_ids`` (missing: none yet)."""
    ensure_notification_tables(store)
    nd = notification_deliveries
    out: dict[str, list[Delivery]] = {}
    if not gate_ids:
        return out
    with store.transaction(write=False) as conn:
        for i in range(0, len(gate_ids), 500):
            part = list(gate_ids[i : i + 500])
            for r in conn.execute(select(nd).where(nd.c.gate_id.in_(part))):
                d = _delivery(r._mapping)
                out.setdefault(d.gate_id, []).append(d)
    return out


def _insert_new(store: SqlRunStore, conn: Connection, values: dict[str, Any]) -> bool:
    """Insert a delivery row unless one exists (then nothing): True when inserted."""
    # imported here: the PostgreSQL dialect's modules are not every command's
    from sqlalchemy.dialects import postgresql, sqlite

    dialect = postgresql if store.is_postgres else sqlite
    nd = notification_deliveries
    stmt = dialect.insert(nd).values(**values).on_conflict_do_nothing().returning(nd.c.gate_id)
    return conn.execute(stmt).first() is not None


def claim(
    store: SqlRunStore,
    gate: GateRecord,
    wanted: Sequence[tuple[str, str]],
    *,
    now: float,
    escalate_to: Sequence[str] | None = None,
) -> list[tuple[str, str]]:
    """Claim the (event, sink) deliveries of ``gate`` this process is to send now:
    each one not recorded yet, and each one still ``sending`` under a claim older
    than :data:`LEASE_S`. Returns those claimed (in ``wanted``'s order); another
    process holds or made the rest.

    With ``escalate_to`` (the escalation is due) and the gate still pending, the
    escalation is recorded in the same transaction, once whoever races: the
    ``(gate, escalated, chain)`` row and a ``gate_escalated`` event
    ``{gate_id, escalate_to, at}`` in the run's chain (``("escalated", "chain")``
    is then among those returned); a gate no longer pending has no escalation
    (its escalated deliveries are not claimed). ``now``: unix seconds. Raises
    ``StoreError`` (and ``RunSuperseded`` from the chain's fence).
    """
    if escalate_to is not None:  # the escalation is chained: only with the store's key
        require_key(store, f"recording the escalation of gate {gate.gate_id}")
    ensure_notification_tables(store)
    nd = notification_deliveries
    pid, host = this_writer()
    me = f"{host}:{pid}"
    taken: list[tuple[str, str]] = []
    with store.transaction() as conn:
        if escalate_to is not None:
            status = conn.execute(
                select(gates.c.status).where(gates.c.gate_id == gate.gate_id).with_for_update()
            ).scalar_one_or_none()
            if status != GateStatus.PENDING:
                wanted = [(e, s) for e, s in wanted if e != "escalated"]
            elif _insert_new(store, conn, _row(gate, "escalated", CHAIN_SINK, RECORDED, me, now)):
                # the escalation enters the run's chain with the row that records it
                escalated = AuditEvent(
                    "gate_escalated",
                    gate.cycle,
                    {"gate_id": gate.gate_id, "escalate_to": list(escalate_to), "at": now},
                    now,
                )
                append(store, conn, gate.run_id, [escalated])
                taken.append(("escalated", CHAIN_SINK))
        for event, sink in wanted:
            if _insert_new(store, conn, _row(gate, event, sink, SENDING, me, now)):
                taken.append((event, sink))
                continue
            retaken = conn.execute(
                update(nd)
                .where(
                    nd.c.gate_id == gate.gate_id,
                    nd.c.event == event,
                    nd.c.sink == sink,
                    nd.c.status == SENDING,
                    nd.c.claimed_at < now - LEASE_S,
                )
                .values(claimed_by=me, claimed_at=now)
            )
            if retaken.rowcount == 1:
                taken.append((event, sink))
    return taken


def _row(
    gate: GateRecord, event: str, sink: str, status: str, me: str, now: float
) -> dict[str, Any]:
    return {
        "gate_id": gate.gate_id,
        "event": event,
        "sink": sink,
        "run_id": gate.run_id,
        "status": status,
        "attempts": 0,
        "answer": None,
        "claimed_by": me,
        "claimed_at": now,
        "first_at": now,
        "last_at": None,
    }


def delivery(store: SqlRunStore, gate_id: str, event: str, sink: str) -> Delivery | None:
    """The recorded delivery of ``event`` of ``gate_id`` to ``sink`` (None: none yet)."""
    ensure_notification_tables(store)
    nd = notification_deliveries
    with store.transaction(write=False) as conn:
        row = conn.execute(
            select(nd).where(nd.c.gate_id == gate_id, nd.c.event == event, nd.c.sink == sink)
        ).one_or_none()
    return None if row is None else _delivery(row._mapping)


def record_attempt(
    store: SqlRunStore,
    gate_id: str,
    event: str,
    sink: str,
    *,
    attempts: int,
    status: str,
    answer: str,
    at: float,
) -> Delivery:
    """Record the outcome of a delivery's latest attempt: ``attempts`` so far,
    ``status`` (``sending`` while more are to come, then ``delivered`` or
    ``failed``), ``answer`` (the HTTP status or SMTP answer, or the error; never a
    secret), ``at`` (unix seconds). The claim's time moves to ``at``, so the
    process sending keeps its claim. Returns the row as recorded; ``StoreError``."""
    nd = notification_deliveries
    key = (nd.c.gate_id == gate_id, nd.c.event == event, nd.c.sink == sink)
    with store.transaction() as conn:
        conn.execute(
            update(nd)
            .where(*key)
            .values(attempts=attempts, status=status, answer=answer, last_at=at, claimed_at=at)
        )
        row = conn.execute(select(nd).where(*key)).one()
    return _delivery(row._mapping)
