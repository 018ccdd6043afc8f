"""Typed read models of the audit store: SQLModel classes over its tables, to query
the audit trail from Python with a SQLModel ``Session`` and ``select(...)``.

The store's tables are SQLAlchemy Core tables (:mod:`audit.tables`: importing the
ORM would cost every ``converge`` command its time); these classes are mapped onto
those same tables, column for column, and change no schema (they create nothing:
``SQLModel.metadata.create_all`` does not know them). Only a program that imports
this module pays for SQLModel; no ``converge`` command imports it. Needs the
``models`` extra (``pip install 'converge-engine[models]'``).

- :class:`Run`: a row of ``runs`` (header, status, stop, chain head);
- :class:`Event`: a row of ``audit_events`` (the hash-chained trail);
- :class:`Gate`: a row of ``gates`` (a HITL gate and how it was decided);
- :class:`Fact`: a promoted fact, the ``fact_promoted`` events of ``audit_events``
  (a run's initial facts are in its ``run_started`` event);
- :class:`Decision`: a gate a person decided, approved or rejected (the ``gates``
  rows of those statuses; an expired gate was decided by its deadline).

Columns are as stored: times in unix seconds, JSON as its canonical text; each class
reads its JSON for you (``Run.stop``, ``Event.data``, ``Fact.content``...). These are
read models: write through :class:`audit.SqlRunStore`, which chains what it writes.

Example (runs stopped by a budget in the last week; every decision by a person)::

    import time
    from sqlmodel import Session, select
    from audit import open_store
    from audit.models import Decision, Run

    store = open_store("converge.db")  # or a PostgreSQL URL
    week_ago = time.time() - 7 * 86400
    with Session(store.sql_engine) as session:
        budget = session.exec(
            select(Run).where(Run.category == "budget", Run.started_at >= week_ago)
        ).all()
        decisions = session.exec(select(Decision).order_by(Decision.decided_at)).all()
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Column, ColumnElement, Subquery, select
from sqlalchemy.orm import registry

from audit.tables import audit_events, gates, runs
from engine.errors import ConfigurationError
from engine.facts import Fact as EngineFact
from engine.facts import fact_from_dict
from engine.status import GateStatus
from engine.stop import StopReason, parse_stop_reason

try:
    from sqlmodel import Field, SQLModel
except ImportError as exc:  # pragma: no cover - the extra's absence
    raise ConfigurationError(
        "audit.models needs the 'models' extra: pip install 'converge-engine[models]' "
        f"({exc.name} is missing)"
    ) from exc

__all__ = ["AuditModel", "Decision", "Event", "Fact", "Gate", "Run"]


class AuditModel(SQLModel, registry=registry()):
    """The base of the audit store's read models: a registry of their own, so that
    they stay out of ``SQLModel.metadata`` (an application's ``create_all`` never
    sees them)."""


def _column(view: Subquery, name: str) -> Column[Any]:
    """The column ``name`` of a view of the store's tables (a subquery's own column)."""
    found = view.c[name]
    assert isinstance(found, Column)
    return found


def _json(text: str | None) -> Any:
    return None if text is None else json.loads(text)


R = runs.c


class Run(AuditModel, table=True):
    """A recorded run: its header, writer, status, stop and chain head (``runs``)."""

    __table__ = runs

    run_id: str = Field(sa_column=R.run_id)
    job: str | None = Field(sa_column=R.job)
    job_spec: str | None = Field(sa_column=R.job_spec)
    suggestors: str = Field(sa_column=R.suggestors)
    status: str = Field(sa_column=R.status)
    pid: int | None = Field(sa_column=R.pid)
    hostname: str | None = Field(sa_column=R.hostname)
    started_at: float = Field(sa_column=R.started_at)
    ended_at: float | None = Field(sa_column=R.ended_at)
    stop_kind: str | None = Field(sa_column=R.stop_kind)
    category: str | None = Field(sa_column=R.category)
    reason: str | None = Field(sa_column=R.reason)
    cycles: int = Field(sa_column=R.cycles)
    facts_count: int = Field(sa_column=R.facts_count)
    facts_root: str | None = Field(sa_column=R.facts_root)
    usage: str | None = Field(sa_column=R.usage)
    duration_ms: int | None = Field(sa_column=R.duration_ms)
    chain: str = Field(sa_column=R.chain)
    head_hash: str = Field(sa_column=R.head_hash)
    last_seq: int = Field(sa_column=R.last_seq)
    parent_run_id: str | None = Field(sa_column=R.parent_run_id)
    epoch: int = Field(sa_column=R.epoch)

    @property
    def stop(self) -> StopReason | None:
        """The stop reason (its ``reason`` JSON, parsed); None before the run stops."""
        return None if self.reason is None else parse_stop_reason(self.reason)

    @property
    def suggestor_names(self) -> list[str]:
        """The suggestors it ran, in registration order."""
        return list(_json(self.suggestors))

    @property
    def usage_data(self) -> dict[str, Any]:
        """``{input_tokens, output_tokens, cost_usd}`` ({} before it stops)."""
        return dict(_json(self.usage) or {})


E = audit_events.c


class Event(AuditModel, table=True):
    """An audit event of a run (``audit_events``): ``seq`` from 1, hash-chained."""

    __table__ = audit_events

    run_id: str = Field(sa_column=E.run_id)
    seq: int = Field(sa_column=E.seq)
    cycle: int = Field(sa_column=E.cycle)
    kind: str = Field(sa_column=E.kind)
    ts: float = Field(sa_column=E.ts)
    payload: str = Field(sa_column=E.payload)
    hash: str = Field(sa_column=E.hash)
    fact_id: str | None = Field(sa_column=E.fact_id)

    @property
    def data(self) -> Any:
        """The payload, parsed."""
        return _json(self.payload)


FACTS = (
    select(E.run_id, E.seq, E.cycle, E.ts, E.fact_id, E.payload)
    .where(E.kind == "fact_promoted")
    .subquery("facts")
)
"""The promoted facts: the ``fact_promoted`` events (a fact is its event's payload)."""


class Fact(AuditModel, table=True):
    """A promoted fact of a run: its ``fact_promoted`` event (run, seq, cycle, time)
    and its fact, read from the payload (``id``, ``key``, ``content``...).
    ``Fact.of_key(KEY)`` is a condition on its key, for a ``where``."""

    __table__ = FACTS
    __mapper_args__ = {"primary_key": [FACTS.c.run_id, FACTS.c.seq]}

    run_id: str = Field(sa_column=_column(FACTS, "run_id"))
    seq: int = Field(sa_column=_column(FACTS, "seq"))
    cycle: int = Field(sa_column=_column(FACTS, "cycle"))
    ts: float = Field(sa_column=_column(FACTS, "ts"))
    fact_id: str | None = Field(sa_column=_column(FACTS, "fact_id"))
    payload: str = Field(sa_column=_column(FACTS, "payload"))

    @classmethod
    def of_key(cls, key: str) -> ColumnElement[bool]:
        """The condition "a fact of ``key``" (its id is ``KEY#N``), for a ``where``."""
        quoted = json.dumps(key)[:-1]  # the JSON string's opening quote and the key
        escaped = quoted.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        column: Any = cls.fact_id
        condition: ColumnElement[bool] = column.like(escaped + "#%", escape="\\")
        return condition

    @property
    def fact(self) -> EngineFact:
        """The fact itself (:class:`engine.Fact`, with its provenance)."""
        return fact_from_dict(json.loads(self.payload))

    @property
    def id(self) -> str:
        """The fact's id (``license#3``)."""
        return self.fact.id

    @property
    def key(self) -> str:
        """The fact's key."""
        return self.fact.key

    @property
    def content(self) -> Any:
        """The fact's content."""
        return self.fact.content


G = gates.c


class Gate(AuditModel, table=True):
    """A HITL gate (``gates``): the proposal it held, its status and its decision
    (``decided_by``: a person, or ``timeout`` for an expired gate)."""

    __table__ = gates

    gate_id: str = Field(sa_column=G.gate_id)
    run_id: str = Field(sa_column=G.run_id)
    proposal_id: str = Field(sa_column=G.proposal_id)
    proposal: str = Field(sa_column=G.proposal)
    suggestor: str = Field(sa_column=G.suggestor)
    summary: str = Field(sa_column=G.summary)
    cycle: int = Field(sa_column=G.cycle)
    policy: str = Field(sa_column=G.policy)
    status: str = Field(sa_column=G.status)
    opened_at: float = Field(sa_column=G.opened_at)
    expires_at: float | None = Field(sa_column=G.expires_at)
    on_timeout: str = Field(sa_column=G.on_timeout)
    decided_by: str | None = Field(sa_column=G.decided_by)
    decided_at: float | None = Field(sa_column=G.decided_at)
    reason: str | None = Field(sa_column=G.reason)
    extra: str = Field(sa_column=G.extra)

    @property
    def proposal_data(self) -> dict[str, Any]:
        """The proposal it held: ``{key, content, confidence, parents, id}``."""
        return dict(_json(self.proposal))


DECISIONS = (
    select(G.gate_id, G.run_id, G.proposal_id, G.summary, G.status, G.decided_by)
    .add_columns(G.decided_at, G.reason, G.cycle)
    .where(G.status.in_([GateStatus.APPROVED.value, GateStatus.REJECTED.value]))
    .subquery("decisions")
)
"""The gates a person decided: approved or rejected (an expired one, its deadline)."""


class Decision(AuditModel, table=True):
    """A person's decision on a gate (``approved`` or ``rejected``), who (``decided_by``),
    when (``decided_at``) and why (``reason``); the answer given with an approval
    (``--value``) is in the run's chained ``gate_decided`` event."""

    __table__ = DECISIONS
    __mapper_args__ = {"primary_key": [DECISIONS.c.gate_id]}

    gate_id: str = Field(sa_column=_column(DECISIONS, "gate_id"))
    run_id: str = Field(sa_column=_column(DECISIONS, "run_id"))
    proposal_id: str = Field(sa_column=_column(DECISIONS, "proposal_id"))
    summary: str = Field(sa_column=_column(DECISIONS, "summary"))
    status: str = Field(sa_column=_column(DECISIONS, "status"))
    decided_by: str | None = Field(sa_column=_column(DECISIONS, "decided_by"))
    decided_at: float | None = Field(sa_column=_column(DECISIONS, "decided_at"))
    reason: str | None = Field(sa_column=_column(DECISIONS, "reason"))
    cycle: int = Field(sa_column=_column(DECISIONS, "cycle"))

    @property
    def approved(self) -> bool:
        """Whether it approved the gate's proposal."""
        return self.status == GateStatus.APPROVED
