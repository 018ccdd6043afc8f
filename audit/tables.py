"""The audit store's tables, as SQLModel models (docs/audit.md).

``runs`` (one row per run: header, status, stop reason, chain head), ``audit_events``
(the hash-chained trail, primary key ``(run_id, seq)``), ``gates`` (HITL gates and
their decisions), ``checkpoints`` (the latest checkpoint of each run, one JSON text;
``checkpoint_parts`` holds the rest of a large one),
``ledger`` (the head of every run's chain at each commit, chained store-wide)
and ``converge_meta`` (the schema version, the ledger head, the key fingerprint).
JSON values are stored as canonical JSON text, never as a database JSON type, so
that the bytes hashed are the bytes stored.
Times are unix seconds (double precision).
"""

from __future__ import annotations

from sqlalchemy import Column, Double, Index, Table, Text
from sqlmodel import Field, SQLModel

SCHEMA_VERSION = 7
"""The version of these tables; a database with another version is refused
(version 1, before the ledger, 2, before the fact chunks, 3, before fencing epochs
and fact ids, 4, with a unique index on the fact ids, 5, before the pending
ledger heads, and 6, before the runs' leases, are upgraded in place)."""


class RunTable(SQLModel, table=True):
    """One run: its header, its writer (pid + hostname), its outcome and chain head."""

    __tablename__ = "runs"
    __table_args__ = (
        Index("ix_runs_started", "started_at"),
        Index("ix_runs_category_started", "category", "started_at"),
        Index("ix_runs_kind_started", "stop_kind", "started_at"),
        Index("ix_runs_job_started", "job", "started_at"),
        Index("ix_runs_status_started", "status", "started_at"),
    )

    run_id: str = Field(primary_key=True, max_length=200)
    job: str | None = Field(default=None, max_length=200)
    job_spec: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    suggestors: str = Field(sa_column=Column(Text, nullable=False))
    status: str = Field(max_length=16)
    pid: int | None = None
    hostname: str | None = Field(default=None, max_length=255)
    started_at: float = Field(sa_column=Column(Double, nullable=False))
    ended_at: float | None = Field(default=None, sa_column=Column(Double, nullable=True))
    stop_kind: str | None = Field(default=None, max_length=64)
    category: str | None = Field(default=None, max_length=32)
    reason: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    cycles: int = 0
    facts_count: int = 0
    facts_root: str | None = Field(default=None, max_length=64)
    usage: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    duration_ms: int | None = None
    chain: str = Field(max_length=16)
    head_hash: str = Field(max_length=64)
    last_seq: int = 0
    parent_run_id: str | None = Field(default=None, max_length=200)
    # the fencing epoch: bumped by each claim; a write of an older claim is refused
    epoch: int = Field(default=0, sa_column_kwargs={"server_default": "0"})


class AuditEventTable(SQLModel, table=True):
    """One audit event: numbered per run (``seq`` from 1) and hash-chained."""

    __tablename__ = "audit_events"
    # one B-tree keyed by (run_id, seq) on SQLite: no rowid table beside the key index
    __table_args__ = {"sqlite_with_rowid": False}

    run_id: str = Field(primary_key=True, max_length=200)
    seq: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    cycle: int
    kind: str = Field(max_length=32)
    ts: float = Field(sa_column=Column(Double, nullable=False))
    payload: str = Field(sa_column=Column(Text, nullable=False))
    hash: str = Field(max_length=64)
    # the id of the fact a ``fact_promoted`` event promotes, as a JSON string (its
    # payload's, unhashed; verify checks it against the payload). Not indexed: a
    # second write of a fact is refused by the fence (a claim's epoch) and by crash
    # recovery (engine._cycle.recording.take_events); an index cost a
    # 100k-fact audited run a seventh of its throughput
    fact_id: str | None = Field(default=None, sa_column=Column(Text, nullable=True))


class GateTable(SQLModel, table=True):
    """A HITL gate: the proposal waiting, and its decision (set once, compare-and-set)."""

    __tablename__ = "gates"
    __table_args__ = (
        Index("ix_gates_status_opened", "status", "opened_at"),
        Index("ix_gates_opened", "opened_at"),
        Index("ix_gates_run", "run_id"),
    )

    gate_id: str = Field(primary_key=True, max_length=200)
    run_id: str = Field(max_length=200)
    proposal_id: str = Field(sa_column=Column(Text, nullable=False))
    proposal: str = Field(sa_column=Column(Text, nullable=False))
    suggestor: str = Field(max_length=200)
    summary: str = Field(sa_column=Column(Text, nullable=False))
    cycle: int
    policy: str = Field(max_length=200)
    status: str = Field(max_length=16)
    opened_at: float = Field(sa_column=Column(Double, nullable=False))
    expires_at: float | None = Field(default=None, sa_column=Column(Double, nullable=True))
    on_timeout: str = Field(max_length=16)
    decided_by: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    decided_at: float | None = Field(default=None, sa_column=Column(Double, nullable=True))
    reason: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    extra: str = Field(sa_column=Column(Text, nullable=False))


class CheckpointTable(SQLModel, table=True):
    """The latest checkpoint of a run (upserted): one JSON text, loaded in one read."""

    __tablename__ = "checkpoints"

    run_id: str = Field(primary_key=True, max_length=200)
    cycle: int
    created_at: float = Field(sa_column=Column(Double, nullable=False))
    data: str = Field(sa_column=Column(Text, nullable=False))


class CheckpointPartTable(SQLModel, table=True):
    """The rest of a checkpoint too large for one value, in parts of at most
    ``CHECKPOINT_PART_CHARS`` characters (``checkpoints.data`` holds part 0)."""

    __tablename__ = "checkpoint_parts"

    run_id: str = Field(primary_key=True, max_length=200)
    part: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    data: str = Field(sa_column=Column(Text, nullable=False))


class FactChunkTable(SQLModel, table=True):
    """The facts one commit added to a run, for checkpoints: a JSON array of their
    checkpoint rows (``[id, key, content, confidence, suggestor, cycle, proposal_id,
    parents]``), from fact number ``first`` (0 = the run's first fact). ``digest`` is
    the sha256 of ``data``.

    A checkpoint names how many facts it holds and the sha256 chain of their chunks'
    digests, so that it stays small however long the run (docs/audit.md).
    """

    __tablename__ = "fact_chunks"

    run_id: str = Field(primary_key=True, max_length=200)
    first: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    count: int
    data: str = Field(sa_column=Column(Text, nullable=False))
    digest: str = Field(max_length=64)


class LedgerTable(SQLModel, table=True):
    """The store-wide ledger: the head of a run's chain at each commit, itself chained.

    ``hash(n) = H(hash(n-1) ‖ canonical JSON of {head, last_seq, run_id, seq})``
    (HMAC with the store's key), so a run cut short, rewritten or deleted no longer
    matches its latest entry, and ``converge anchor`` can print one head that
    proves everything before it (Crosby-Wallach's history tree, kept linear).
    """

    __tablename__ = "ledger"
    __table_args__ = (Index("ix_ledger_run_seq", "run_id", "seq"),)

    seq: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    run_id: str = Field(max_length=200)
    last_seq: int
    head: str = Field(max_length=64)
    hash: str = Field(max_length=64)


class LedgerPendingTable(SQLModel, table=True):
    """A run head committed and not yet integrated into the ledger (docs/audit.md,
    "The ledger's integration delay"): each commit inserts one, locking only its
    run; the sequencer (:mod:`audit.ledger._sequencer`) appends them to the ``ledger`` and
    deletes them in one transaction. ``committed_at`` is unix seconds."""

    __tablename__ = "ledger_pending"

    run_id: str = Field(primary_key=True, max_length=200)
    last_seq: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    head: str = Field(max_length=64)
    committed_at: float = Field(sa_column=Column(Double, nullable=False))


class MetaTable(SQLModel, table=True):
    """Key/value facts about the database itself (``schema_version``)."""

    __tablename__ = "converge_meta"

    key: str = Field(primary_key=True, max_length=64)
    value: str = Field(max_length=255)


def _table(model: type[SQLModel]) -> Table:
    table = model.__table__  # type: ignore[attr-defined]
    assert isinstance(table, Table)
    return table


class RunLeaseTable(SQLModel, table=True):
    """The lease of a ``running`` run (audit.trail._lease): who holds it (``holder``:
    host/pid/process start), at which fencing ``epoch``, until when by the
    database's clock (``expires_at``, unix seconds); renewed by its holder, taken
    over by another process once expired, deleted when the run stops or pauses."""

    __tablename__ = "run_leases"

    run_id: str = Field(primary_key=True, max_length=200)
    holder: str = Field(max_length=300)
    epoch: int = 0
    expires_at: float = Field(sa_column=Column(Double, nullable=False))
    renewed_at: float = Field(sa_column=Column(Double, nullable=False))


runs: Table = _table(RunTable)
audit_events: Table = _table(AuditEventTable)
gates: Table = _table(GateTable)
checkpoints: Table = _table(CheckpointTable)
meta: Table = _table(MetaTable)
ledger: Table = _table(LedgerTable)
checkpoint_parts: Table = _table(CheckpointPartTable)
fact_chunks: Table = _table(FactChunkTable)
ledger_pending: Table = _table(LedgerPendingTable)
run_leases: Table = _table(RunLeaseTable)

TABLES: tuple[Table, ...] = (
    runs,
    audit_events,
    gates,
    checkpoints,
    meta,
    ledger,
    checkpoint_parts,
    fact_chunks,
    ledger_pending,
    run_leases,
)

CHECKPOINT_PART_CHARS = 16 * 1024 * 1024
"""Largest piece of a checkpoint stored in one value (SQLite refuses values over 1 GB)."""
"""Every table of the store, in creation order."""


# -- the approval inbox (converge serve): created on first use by audit.people._tokens and
# audit.people._approvals, so a store of an earlier version gains them without a migration


class ApiTokenTable(SQLModel, table=True):
    """An API token of a person who decides or views gates: only its sha256 is stored.
    ``expires_at`` (None = never) and ``revoked_at`` refuse it from then on."""

    __tablename__ = "api_tokens"

    token_hash: str = Field(primary_key=True, max_length=64)
    name: str = Field(max_length=200, index=True)
    role: str = Field(max_length=16)
    created_at: float = Field(sa_column=Column(Double, nullable=False))
    expires_at: float | None = Field(default=None, sa_column=Column(Double, nullable=True))
    revoked_at: float | None = Field(default=None, sa_column=Column(Double, nullable=True))


class GroupMemberTable(SQLModel, table=True):
    """A person's membership of a group (``converge user add NAME --group G``)."""

    __tablename__ = "group_members"

    group_name: str = Field(primary_key=True, max_length=200)
    name: str = Field(primary_key=True, max_length=200, index=True)
    added_at: float = Field(sa_column=Column(Double, nullable=False))


class RunActorTable(SQLModel, table=True):
    """Who submitted, ran or resumed a run (four-eyes gates refuse them as deciders)."""

    __tablename__ = "run_actors"

    run_id: str = Field(primary_key=True, max_length=200)
    name: str = Field(primary_key=True, max_length=200)
    action: str = Field(primary_key=True, max_length=16)
    ts: float = Field(sa_column=Column(Double, nullable=False))


class AccessLogTable(SQLModel, table=True):
    """A refused request (403, 429) or failed sign-in, by whom and from where."""

    __tablename__ = "access_log"
    __table_args__ = (Index("ix_access_log_target", "target", "ts"),)

    id: int | None = Field(default=None, primary_key=True)
    ts: float = Field(sa_column=Column(Double, nullable=False))
    client: str | None = Field(default=None, max_length=200)
    name: str | None = Field(default=None, max_length=200)
    action: str = Field(max_length=32)
    target: str | None = Field(default=None, max_length=200)
    outcome: str = Field(max_length=16)
    detail: str | None = Field(default=None, sa_column=Column(Text, nullable=True))


class GateVoteTable(SQLModel, table=True):
    """One person's approval or rejection of a gate; one row per (gate, person)."""

    __tablename__ = "gate_votes"

    gate_id: str = Field(primary_key=True, max_length=200)
    voter: str = Field(primary_key=True, max_length=200)
    approved: bool
    reason: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    ts: float = Field(sa_column=Column(Double, nullable=False))


api_tokens: Table = _table(ApiTokenTable)
gate_votes: Table = _table(GateVoteTable)
group_members: Table = _table(GroupMemberTable)
run_actors: Table = _table(RunActorTable)
access_log: Table = _table(AccessLogTable)

INBOX_TABLES: tuple[Table, ...] = (api_tokens, gate_votes, group_members, run_actors, access_log)
"""The tables of the approval inbox, created when first needed (``checkfirst``)."""


# -- the run service (converge submit / worker / cancel): created on first use by
# audit.run_queue._queue, like the inbox's tables


class RunCancelTable(SQLModel, table=True):
    """A request to cancel a queued or running run, read by whichever process runs it."""

    __tablename__ = "run_cancels"

    run_id: str = Field(primary_key=True, max_length=200)
    requested_by: str = Field(max_length=200)
    requested_at: float = Field(sa_column=Column(Double, nullable=False))


run_cancels: Table = _table(RunCancelTable)

SERVICE_TABLES: tuple[Table, ...] = (run_cancels,)
"""The tables of the run service, created when first needed (``checkfirst``)."""


# -- gate notifications (converge/notifications.py): created on first use by
# audit.notifications._outbox, like the inbox's tables


class NotificationDeliveryTable(SQLModel, table=True):
    """One notification of a gate's event to one sink: its outbox row.

    ``event`` is ``opened``, ``escalated``, ``decided`` or ``expired``; ``sink`` is
    ``webhook:URL``, ``email:ADDRESS`` or ``chain`` (the ``gate_escalated`` event).
    ``status`` is ``sending`` (claimed by ``claimed_by`` at ``claimed_at``),
    ``delivered``, ``failed`` or ``recorded``; ``answer`` the last HTTP status or
    SMTP answer (or why nothing was sent). Times are unix seconds.
    """

    __tablename__ = "notification_deliveries"
    __table_args__ = (Index("ix_notification_deliveries_status", "status"),)

    gate_id: str = Field(primary_key=True, max_length=200)
    event: str = Field(primary_key=True, max_length=16)
    sink: str = Field(sa_column=Column(Text, primary_key=True))
    run_id: str = Field(max_length=200)
    status: str = Field(max_length=16)
    attempts: int = 0
    answer: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    claimed_by: str = Field(max_length=255)
    claimed_at: float = Field(sa_column=Column(Double, nullable=False))
    first_at: float = Field(sa_column=Column(Double, nullable=False))
    last_at: float | None = Field(default=None, sa_column=Column(Double, nullable=True))


notification_deliveries: Table = _table(NotificationDeliveryTable)

NOTIFICATION_TABLES: tuple[Table, ...] = (notification_deliveries,)
"""The tables of gate notifications, created when first needed (``checkfirst``)."""


# -- signatures (converge keys / anchor / export --proof): created on first use by
# audit.signing._statements, like the inbox's tables


class SignatureTable(SQLModel, table=True):
    """A statement signed with the store's Ed25519 key (docs/audit-format.md): a
    ledger head (``kind`` ``ledger_head``, ``subject`` its size) or a run's final
    facts root (``facts_root``, ``subject`` the run id); ``statement`` is the signed
    JSON line, ``key_id`` names the public key."""

    __tablename__ = "signatures"

    kind: str = Field(primary_key=True, max_length=32)
    subject: str = Field(primary_key=True, max_length=200)
    key_id: str = Field(primary_key=True, max_length=64)
    statement: str = Field(sa_column=Column(Text, nullable=False))
    created_at: float = Field(sa_column=Column(Double, nullable=False))


signatures: Table = _table(SignatureTable)

SIGNATURE_TABLES: tuple[Table, ...] = (signatures,)
"""The tables of signed statements, created when first needed (``checkfirst``)."""
