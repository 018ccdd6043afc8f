"""The store's schema: create the tables on first use, upgrade an older schema in
place, refuse a newer one or tables of another application (docs/audit.md)."""

from __future__ import annotations

from sqlalchemy import Connection, Table, insert, inspect, select, text, update
from sqlalchemy.exc import DBAPIError

from audit.core import StoreCore
from audit.shadows import check_readable, install_shadows, read_shape, shadow_statements
from audit.tables import (
    SCHEMA_VERSION,
    TABLES,
    audit_events,
    checkpoint_parts,
    checkpoints,
    fact_chunks,
    ledger,
    meta,
    runs,
)
from audit.trail import GENESIS
from engine.errors import SchemaVersionError, StoreError


def ensure_schema(store: StoreCore) -> None:
    """Create the tables on first use; refuse a foreign or newer schema.

    A store opened to read (``store.read_only``) is never written: a store of an
    earlier schema is read through the current one's shadows
    (:mod:`audit.shadows`) and upgraded by the first process that writes.

    Raises ``SchemaVersionError`` (another schema version) or ``StoreError``
    (tables of another application, database unreachable).
    """
    if store.read_only and _open_to_read(store):
        return
    try:
        # fast path: an up-to-date store answers one query (no inspection, no lock)
        with store.transaction(write=False) as conn:
            if conn.execute(
                select(meta.c.value).where(meta.c.key == "schema_version")
            ).scalar() == str(SCHEMA_VERSION):
                return
    except StoreError:
        pass
    try:
        with store.transaction() as conn:
            if store.is_postgres:
                conn.execute(text("SELECT pg_advisory_xact_lock(714522)"))
            _check_and_create(conn, store.shown)
    except StoreError as exc:
        if isinstance(exc, SchemaVersionError) or str(exc).startswith("cannot open"):
            raise
        msg = str(exc).removeprefix(f"audit store {store.shown}: ")
        raise StoreError(f"cannot open audit store {store.shown}: {msg}") from exc


def _open_to_read(store: StoreCore) -> bool:
    """Open a store to read without writing to it (False: an empty database, which
    is created as before). Raises what :func:`ensure_schema` raises."""
    try:
        with store.transaction(write=False) as conn:
            shape = read_shape(conn)
    except StoreError as exc:
        msg = str(exc).removeprefix(f"audit store {store.shown}: ")
        raise StoreError(f"cannot open audit store {store.shown}: {msg}") from exc
    if shape.version is None and not shape.columns:
        return False
    check_readable(shape, store.shown)
    if not shape.current():
        install_shadows(store.sql_engine, shadow_statements(shape, store.sql_engine.dialect))
    store.read_version = int(shape.version) if shape.version else SCHEMA_VERSION
    store.writable = shape.writable and "immutable=1" not in store.url
    return True


def _check_and_create(conn: Connection, shown: str) -> None:
    from audit.ledger import LEDGER_HEAD

    insp = inspect(conn)
    existing = set(insp.get_table_names())
    version: str | None = None
    if meta.name in existing:
        version = conn.execute(select(meta.c.value).where(meta.c.key == "schema_version")).scalar()
        if version == "1":
            version = _upgrade_from_1(conn, existing)
        if version == "2":
            # version 3 adds fact_chunks (created below); checkpoints written by
            # version 2 carry their facts inline and still load
            conn.execute(update(meta).where(meta.c.key == "schema_version").values(value="3"))
            version = "3"
        if version == "3":
            version = _upgrade_from_3(conn, existing, shown)
        if version == "4":
            version = _upgrade_from_4(conn)
        if version == "5":
            version = _upgrade_from_5(conn)
        if version == "6":
            version = _upgrade_from_6(conn)
        if version is not None and version != str(SCHEMA_VERSION):
            raise SchemaVersionError(
                f"audit store {shown} has schema version {version}; "
                f"this converge understands version {SCHEMA_VERSION}"
            )
    for table in TABLES:
        if table.name not in existing:
            continue
        have = {c["name"] for c in insp.get_columns(table.name)}
        want = {c.name for c in table.columns}
        if have != want:
            missing = sorted(want - have)
            extra = sorted(have - want)
            raise StoreError(
                f"cannot open audit store {shown}: its table {table.name!r} belongs "
                f"to another schema (missing columns {missing or 'none'}, "
                f"unknown columns {extra or 'none'})"
            )
    for table in TABLES:
        if table.name not in existing:
            table.create(conn)
            if conn.dialect.name == "postgresql" and table in LZ4_TABLES:
                _prefer_lz4(conn, table)
    if version is None:
        conn.execute(insert(meta).values(key="schema_version", value=str(SCHEMA_VERSION)))
        conn.execute(insert(meta).values(key=LEDGER_HEAD, value=f"0:{GENESIS}"))


LZ4_TABLES = (fact_chunks, checkpoints, checkpoint_parts)
"""The PostgreSQL tables whose ``data`` texts (a commit's fact chunk, a checkpoint:
hundreds of KB) are compressed with lz4 rather than the default pglz: measured on
the ten chunks of a 100k-fact run (about 0.5 MB each), pglz cost PostgreSQL
170-200 ms of CPU and lz4 47 ms, for 4.9 and 5.3 MB on disk."""


def _prefer_lz4(conn: Connection, table: Table) -> None:
    """Compress ``table.data`` with lz4 on a PostgreSQL built with it (14 and later);
    else, in a savepoint, leave pglz."""
    try:
        with conn.begin_nested():
            conn.execute(text(f"ALTER TABLE {table.name} ALTER COLUMN data SET COMPRESSION lz4"))
    except DBAPIError:
        pass  # no lz4 in this server: pglz stays, at a cost in CPU only


def _upgrade_from_1(conn: Connection, existing: set[str]) -> str:
    """Version 1 had no ledger: add it; runs recorded before are not checked against it."""
    from audit.ledger import LEDGER_HEAD, LEDGER_SINCE

    for table in (ledger, checkpoint_parts):
        if table.name not in existing:
            table.create(conn)
            existing.add(table.name)
    conn.execute(insert(meta).values(key=LEDGER_HEAD, value=f"0:{GENESIS}"))
    conn.execute(insert(meta).values(key=LEDGER_SINCE, value="1"))
    conn.execute(update(meta).where(meta.c.key == "schema_version").values(value="2"))
    return "2"


def _upgrade_from_3(conn: Connection, existing: set[str], shown: str) -> str:
    """Version 4 adds the runs' fencing epoch and the fact id of each
    ``fact_promoted`` event. A store that already holds a fact id twice in a run
    is refused, naming the run and the fact (an older converge recorded it again
    after a crash)."""
    if runs.name in existing:
        have = {c["name"] for c in inspect(conn).get_columns(runs.name)}
        if "epoch" not in have:
            conn.execute(text("ALTER TABLE runs ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0"))
    if audit_events.name in existing:
        have = {c["name"] for c in inspect(conn).get_columns(audit_events.name)}
        if "fact_id" not in have:
            conn.execute(text("ALTER TABLE audit_events ADD COLUMN fact_id TEXT"))
        payload_id = (
            "((payload::jsonb) -> 'id')::text"
            if conn.dialect.name == "postgresql"
            else "json_quote(json_extract(payload, '$.id'))"
        )
        conn.execute(
            text(f"UPDATE audit_events SET fact_id = {payload_id} WHERE kind = 'fact_promoted'")
        )
        twice = conn.execute(
            text(
                "SELECT run_id, fact_id FROM audit_events WHERE fact_id IS NOT NULL "
                "GROUP BY run_id, fact_id HAVING count(*) > 1 LIMIT 1"
            )
        ).first()
        if twice is not None:
            raise StoreError(
                f"cannot upgrade audit store {shown} to schema version {SCHEMA_VERSION}: "
                f"run {twice[0]} holds fact {twice[1]} twice (an older converge recorded it "
                "again after a crash); open the store with that older converge to export "
                "or delete the run"
            )
    conn.execute(update(meta).where(meta.c.key == "schema_version").values(value="4"))
    return "4"


FACT_ID_INDEX = "ux_audit_events_fact_id"
"""Version 4's unique index on (run_id, fact_id), dropped by version 5."""


def _upgrade_from_4(conn: Connection) -> str:
    """Version 5 drops version 4's unique index on the fact ids: the fence and crash
    recovery refuse a second write of a fact (docs/gates.md), and the index cost
    the write path about a seventh of its throughput."""
    conn.execute(text(f"DROP INDEX IF EXISTS {FACT_ID_INDEX}"))
    conn.execute(update(meta).where(meta.c.key == "schema_version").values(value="5"))
    return "5"


def _upgrade_from_5(conn: Connection) -> str:
    """Version 6 adds ``ledger_pending`` (created with the missing tables): run heads
    committed and not yet integrated into the ledger (:mod:`audit.ledger._sequencer`)."""
    conn.execute(update(meta).where(meta.c.key == "schema_version").values(value="6"))
    return "6"


def _upgrade_from_6(conn: Connection) -> str:
    """Version 7 adds ``run_leases`` (created with the missing tables): the lease of
    each running run (:mod:`audit.writing._lease`). A run left ``running`` by an older
    converge has none: its writer is judged by its pid, as that converge did."""
    conn.execute(
        update(meta).where(meta.c.key == "schema_version").values(value=str(SCHEMA_VERSION))
    )
    return str(SCHEMA_VERSION)
