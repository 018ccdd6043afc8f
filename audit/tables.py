"""The audit store's tables, as SQLAlchemy Core tables (docs/audit.md).

``runs`` (one row per run: header, status, stop reason, chain head), ``audit_events``
(the hash-chained trail, primary key ``(run_id, seq)``), ``gates`` (HITL gates and
their decisions), ``checkpoints`` (the latest checkpoint of each run, one JSON text;
``checkpoint_parts`` holds the rest of a large one),
``ledger`` (the head of every run's chain at each commit, chained store-wide)
and ``converge_meta`` (the schema version, the ledger head, the key fingerprint).
JSON values are stored as canonical JSON text, never as a database JSON type, so
that the bytes hashed are the bytes stored.
Times are unix seconds (double precision).

Core tables rather than SQLModel models: the store reads no row as a model, and the
models cost every ``converge`` process about 0.1 s of imports (pydantic classes and
SQLAlchemy's ORM) for the same DDL. A Python user's typed read models are
:mod:`audit.models` (SQLModel classes mapped onto these tables), which no command
imports.
"""

from __future__ import annotations

from sqlalchemy import Boolean, Column, Double, Index, Integer, MetaData, String, Table, Text

SCHEMA_VERSION = 7
"""The version of these tables; a database with another version is refused
(version 1, before the ledger, 2, before the fact chunks, 3, before fencing epochs
and fact ids, 4, with a unique index on the fact ids, 5, before the pending
ledger heads, and 6, before the runs' leases, are upgraded in place)."""

METADATA = MetaData()
"""The metadata every table of the store belongs to."""


def _name(name: str, length: int, *, key: bool = False, null: bool = False) -> Column[str]:
    """A ``VARCHAR(length)`` column (a primary key part when ``key``)."""
    return Column(name, String(length), primary_key=key, nullable=null and not key)


def _text(name: str, *, null: bool = False) -> Column[str]:
    return Column(name, Text, nullable=null)


def _int(name: str, *, key: bool = False, default: int | None = None) -> Column[int]:
    """An ``INTEGER``; a primary key part is never autoincremented."""
    if key:
        return Column(name, Integer, primary_key=True, autoincrement=False)
    return Column(name, Integer, nullable=False, default=default)


def _time(name: str, *, null: bool = False) -> Column[float]:
    """Unix seconds, ``DOUBLE``."""
    return Column(name, Double, nullable=null)


runs = Table(
    "runs",
    METADATA,
    _name("run_id", 200, key=True),
    _name("job", 200, null=True),
    _text("job_spec", null=True),
    _text("suggestors"),
    _name("status", 16),
    Column("pid", Integer, nullable=True),
    _name("hostname", 255, null=True),
    _time("started_at"),
    _time("ended_at", null=True),
    _name("stop_kind", 64, null=True),
    _name("category", 32, null=True),
    _text("reason", null=True),
    _int("cycles", default=0),
    _int("facts_count", default=0),
    _name("facts_root", 64, null=True),
    _text("usage", null=True),
    Column("duration_ms", Integer, nullable=True),
    _name("chain", 16),
    _name("head_hash", 64),
    _int("last_seq", default=0),
    _name("parent_run_id", 200, null=True),
    # the fencing epoch: bumped by each claim; a write of an older claim is refused
    Column("epoch", Integer, nullable=False, default=0, server_default="0"),
    Index("ix_runs_started", "started_at"),
    Index("ix_runs_category_started", "category", "started_at"),
    Index("ix_runs_kind_started", "stop_kind", "started_at"),
    Index("ix_runs_job_started", "job", "started_at"),
    Index("ix_runs_status_started", "status", "started_at"),
)
"""One run: its header, its writer (pid + hostname), its outcome and chain head."""

audit_events = Table(
    "audit_events",
    METADATA,
    _name("run_id", 200, key=True),
    _int("seq", key=True),
    _int("cycle"),
    _name("kind", 32),
    _time("ts"),
    _text("payload"),
    _name("hash", 64),
    # the id of the fact a ``fact_promoted`` event promotes, as a JSON string (its
    # payload's, unhashed; verify checks it against the payload). Not indexed: a
    # second write of a fact is refused by the fence (a claim's epoch) and by crash
    # recovery (engine._cycle.recording.take_events); an index cost a
    # 100k-fact audited run a seventh of its throughput
    _text("fact_id", null=True),
    # one B-tree keyed by (run_id, seq) on SQLite: no rowid table beside the key index
    sqlite_with_rowid=False,
)
"""One audit event: numbered per run (``seq`` from 1) and hash-chained."""

gates = Table(
    "gates",
    METADATA,
    _name("gate_id", 200, key=True),
    _name("run_id", 200),
    _text("proposal_id"),
    _text("proposal"),
    _name("suggestor", 200),
    _text("summary"),
    _int("cycle"),
    _name("policy", 200),
    _name("status", 16),
    _time("opened_at"),
    _time("expires_at", null=True),
    _name("on_timeout", 16),
    _text("decided_by", null=True),
    _time("decided_at", null=True),
    _text("reason", null=True),
    _text("extra"),
    Index("ix_gates_status_opened", "status", "opened_at"),
    Index("ix_gates_opened", "opened_at"),
    Index("ix_gates_run", "run_id"),
)
"""A HITL gate: the proposal waiting, and its decision (set once, compare-and-set)."""

checkpoints = Table(
    "checkpoints",
    METADATA,
    _name("run_id", 200, key=True),
    _int("cycle"),
    _time("created_at"),
    _text("data"),
)
"""The latest checkpoint of a run (upserted): one JSON text, loaded in one read."""

meta = Table(
    "converge_meta",
    METADATA,
    _name("key", 64, key=True),
    _name("value", 255),
)
"""Key/value facts about the database itself (``schema_version``)."""

ledger = Table(
    "ledger",
    METADATA,
    _int("seq", key=True),
    _name("run_id", 200),
    _int("last_seq"),
    _name("head", 64),
    _name("hash", 64),
    Index("ix_ledger_run_seq", "run_id", "seq"),
)
"""The store-wide ledger: the head of a run's chain at each commit, itself chained.

``hash(n) = H(hash(n-1) ‖ canonical JSON of {head, last_seq, run_id, seq})``
(HMAC with the store's key), so a run cut short, rewritten or deleted no longer
matches its latest entry, and ``converge anchor`` can print one head that
proves everything before it (Crosby-Wallach's history tree, kept linear)."""

checkpoint_parts = Table(
    "checkpoint_parts",
    METADATA,
    _name("run_id", 200, key=True),
    _int("part", key=True),
    _text("data"),
)
"""The rest of a checkpoint too large for one value, in parts of at most
``CHECKPOINT_PART_CHARS`` characters (``checkpoints.data`` holds part 0)."""

fact_chunks = Table(
    "fact_chunks",
    METADATA,
    _name("run_id", 200, key=True),
    _int("first", key=True),
    _int("count"),
    _text("data"),
    _name("digest", 64),
)
"""The facts one commit added to a run, for checkpoints: a JSON array of their
checkpoint rows (``[id, key, content, confidence, suggestor, cycle, proposal_id,
parents]``), from fact number ``first`` (0 = the run's first fact). ``digest`` is
the sha256 of ``data``.

A checkpoint names how many facts it holds and the sha256 chain of their chunks'
digests, so that it stays small however long the run (docs/audit.md)."""

ledger_pending = Table(
    "ledger_pending",
    METADATA,
    _name("run_id", 200, key=True),
    _int("last_seq", key=True),
    _name("head", 64),
    _time("committed_at"),
)
"""A run head committed and not yet integrated into the ledger (docs/audit.md,
"The ledger's integration delay"): each commit inserts one, locking only its
run; the sequencer (:mod:`audit.ledger._sequencer`) appends them to the ``ledger`` and
deletes them in one transaction. ``committed_at`` is unix seconds."""

run_leases = Table(
    "run_leases",
    METADATA,
    _name("run_id", 200, key=True),
    _name("holder", 300),
    _int("epoch", default=0),
    _time("expires_at"),
    _time("renewed_at"),
)
"""The lease of a ``running`` run (audit.writing._lease): who holds it (``holder``:
host/pid/process start), at which fencing ``epoch``, until when by the
database's clock (``expires_at``, unix seconds); renewed by its holder, taken
over by another process once expired, deleted when the run stops or pauses."""

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
"""Every table of the store, in creation order."""

CHECKPOINT_PART_CHARS = 16 * 1024 * 1024
"""Largest piece of a checkpoint stored in one value (SQLite refuses values over 1 GB)."""


# -- the approval inbox (converge serve): created on first use by audit.people._tokens and
# audit.people._approvals, so a store of an earlier version gains them without a migration

api_tokens = Table(
    "api_tokens",
    METADATA,
    _name("token_hash", 64, key=True),
    _name("name", 200),
    _name("role", 16),
    _time("created_at"),
    _time("expires_at", null=True),
    _time("revoked_at", null=True),
    Index("ix_api_tokens_name", "name"),
)
"""An API token of a person who decides or views gates: only its sha256 is stored.
``expires_at`` (None = never) and ``revoked_at`` refuse it from then on."""

group_members = Table(
    "group_members",
    METADATA,
    _name("group_name", 200, key=True),
    _name("name", 200, key=True),
    _time("added_at"),
    Index("ix_group_members_name", "name"),
)
"""A person's membership of a group (``converge user add NAME --group G``)."""

run_actors = Table(
    "run_actors",
    METADATA,
    _name("run_id", 200, key=True),
    _name("name", 200, key=True),
    _name("action", 16, key=True),
    _time("ts"),
)
"""Who submitted, ran or resumed a run (four-eyes gates refuse them as deciders)."""

access_log = Table(
    "access_log",
    METADATA,
    Column("id", Integer, primary_key=True),
    _time("ts"),
    _name("client", 200, null=True),
    _name("name", 200, null=True),
    _name("action", 32),
    _name("target", 200, null=True),
    _name("outcome", 16),
    _text("detail", null=True),
    Index("ix_access_log_target", "target", "ts"),
    # the failed sign-ins of a client, counted by every server (converge.web.limits)
    Index("ix_access_log_client", "client", "ts"),
)
"""A refused request (403, 429) or failed sign-in, by whom and from where."""

gate_votes = Table(
    "gate_votes",
    METADATA,
    _name("gate_id", 200, key=True),
    _name("voter", 200, key=True),
    Column("approved", Boolean, nullable=False),
    _text("reason", null=True),
    _time("ts"),
)
"""One person's approval or rejection of a gate; one row per (gate, person)."""

INBOX_TABLES: tuple[Table, ...] = (api_tokens, gate_votes, group_members, run_actors, access_log)
"""The tables of the approval inbox, created when first needed (``checkfirst``)."""


# -- the run service (converge submit / worker / cancel): created on first use by
# audit.run_queue._queue, like the inbox's tables

run_cancels = Table(
    "run_cancels",
    METADATA,
    _name("run_id", 200, key=True),
    _name("requested_by", 200),
    _time("requested_at"),
)
"""A request to cancel a queued or running run, read by whichever process runs it."""

SERVICE_TABLES: tuple[Table, ...] = (run_cancels,)
"""The tables of the run service, created when first needed (``checkfirst``)."""


# -- gate notifications (converge/notifications.py): created on first use by
# audit.notifications._outbox, like the inbox's tables

notification_deliveries = Table(
    "notification_deliveries",
    METADATA,
    _name("gate_id", 200, key=True),
    _name("event", 16, key=True),
    Column("sink", Text, primary_key=True),
    _name("run_id", 200),
    _name("status", 16),
    _int("attempts", default=0),
    _text("answer", null=True),
    _name("claimed_by", 255),
    _time("claimed_at"),
    _time("first_at"),
    _time("last_at", null=True),
    Index("ix_notification_deliveries_status", "status"),
)
"""One notification of a gate's event to one sink: its outbox row.

``event`` is ``opened``, ``escalated``, ``decided`` or ``expired``; ``sink`` is
``webhook:URL``, ``email:ADDRESS`` or ``chain`` (the ``gate_escalated`` event).
``status`` is ``sending`` (claimed by ``claimed_by`` at ``claimed_at``),
``delivered``, ``failed`` or ``recorded``; ``answer`` the last HTTP status or
SMTP answer (or why nothing was sent). Times are unix seconds."""

NOTIFICATION_TABLES: tuple[Table, ...] = (notification_deliveries,)
"""The tables of gate notifications, created when first needed (``checkfirst``)."""


# -- signatures (converge keys / anchor / export --proof): created on first use by
# audit.signing._statements, like the inbox's tables

signatures = Table(
    "signatures",
    METADATA,
    _name("kind", 32, key=True),
    _name("subject", 200, key=True),
    _name("key_id", 64, key=True),
    _text("statement"),
    _time("created_at"),
)
"""A statement signed with the store's Ed25519 key (docs/audit-format.md): a
ledger head (``kind`` ``ledger_head``, ``subject`` its size) or a run's final
facts root (``facts_root``, ``subject`` the run id); ``statement`` is the signed
JSON line, ``key_id`` names the public key."""

SIGNATURE_TABLES: tuple[Table, ...] = (signatures,)
"""The tables of signed statements, created when first needed (``checkfirst``)."""


# -- retention (converge prune): created on first use by audit.retention, like the
# inbox's tables

pruned_runs = Table(
    "pruned_runs",
    METADATA,
    _name("run_id", 200, key=True),
    _name("job", 200, null=True),
    _name("parent_run_id", 200, null=True),
    _name("stop_kind", 64, null=True),
    _time("started_at"),
    _time("ended_at", null=True),
    _name("chain", 16),
    _name("head_hash", 64),
    _int("last_seq", default=0),
    _int("facts_count", default=0),
    _name("facts_root", 64, null=True),
    _text("pruned_by"),
    _time("pruned_at"),
    _text("reason"),
    _text("archive", null=True),
    _int("ledger_seq", default=0),
    _name("digest", 64),
)
"""The tombstone of a run removed by ``converge prune``: what the run was (its job,
parent, stop), its chain head, last seq, facts count and root when it was removed,
who removed it, when (unix seconds) and why, the bundle archived (its file name, or
None), and ``digest``, the sha256 of the tombstone's canonical JSON
(:func:`audit.queries.tombstone_digest`), which the ledger entry ``ledger_seq``
of the run carries as its head: the ledger commits to the tombstone."""

PRUNE_TABLES: tuple[Table, ...] = (pruned_runs,)
"""The tables of retention, created when first needed (``checkfirst``)."""
