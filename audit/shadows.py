"""Reading a store of an earlier schema without writing to it (docs/audit.md,
"Stores of earlier versions").

A store opened to read (``open_store(url, read_only=True)``: a write-protected
SQLite copy, a PostgreSQL role that may only ``SELECT``) is never upgraded: the
tables and columns the current schema has and the store lacks are given to each of
its database sessions as *shadows*, temporary tables and views that only that
session sees (SQLite's ``temp`` schema, PostgreSQL's ``pg_temp``, both searched
before the store's own tables):

- a table the store lacks (``run_leases`` before version 7, a feature table never
  used) is an empty temporary table, as the upgrade would create it;
- a table that lacks columns (``runs.epoch`` and ``audit_events.fact_id`` before
  version 4) is a temporary view over the store's table with each missing column
  computed as the upgrade step of :mod:`audit.schema` fills it.

Nothing is written to the store; the first command that writes upgrades it in
place (:func:`audit.schema.ensure_schema`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine, Table, event, inspect, select, text
from sqlalchemy.schema import CreateTable

from audit.tables import METADATA, SCHEMA_VERSION, meta
from engine.errors import SchemaVersionError, StoreError

__all__ = ["StoreShape", "install_shadows", "read_shape", "shadow_statements"]

_FILLED: dict[tuple[str, str], dict[str, str]] = {
    # as audit.schema._upgrade_from_3 fills them
    ("runs", "epoch"): {"sqlite": "0", "postgresql": "0"},
    ("audit_events", "fact_id"): {
        "sqlite": "CASE WHEN kind = 'fact_promoted' "
        "THEN json_quote(json_extract(payload, '$.id')) END",
        "postgresql": "CASE WHEN kind = 'fact_promoted' THEN ((payload::jsonb) -> 'id')::text END",
    },
}
"""How a view computes a column an older schema lacks, per dialect (else NULL)."""


@dataclass(frozen=True, slots=True)
class StoreShape:
    """What a store holds: its ``version`` (None: no ``converge_meta`` table, an empty
    database), and the columns of each table of :data:`audit.tables.METADATA` it has
    (``columns``: table name -> column names); ``schema`` the database schema
    holding them (SQLite ``main``, PostgreSQL's ``current_schema()``);
    ``writable`` whether this session's role may update the store (PostgreSQL's
    privileges; SQLite: always, the file's own mode is judged by its URL)."""

    version: str | None
    columns: dict[str, frozenset[str]]
    schema: str
    writable: bool = True

    def current(self) -> bool:
        """Whether the store has the current schema version and every table."""
        return self.version == str(SCHEMA_VERSION) and all(
            t.name in self.columns for t in METADATA.sorted_tables
        )


def read_shape(conn: Connection) -> StoreShape:
    """The shape of the store ``conn`` reads (one read transaction; nothing written)."""
    insp = inspect(conn)
    names = set(insp.get_table_names())
    columns = {
        t.name: frozenset(c["name"] for c in insp.get_columns(t.name))
        for t in METADATA.sorted_tables
        if t.name in names
    }
    version = None
    if meta.name in names:
        found = conn.execute(select(meta.c.value).where(meta.c.key == "schema_version")).scalar()
        version = None if found is None else str(found)
    if conn.dialect.name != "postgresql":
        return StoreShape(version, columns, "main")
    schema = str(conn.execute(text("SELECT current_schema()")).scalar())
    writable = meta.name not in names or bool(
        conn.execute(
            text("SELECT has_table_privilege(:t, 'UPDATE')"), {"t": f'"{schema}".{meta.name}'}
        ).scalar()
    )
    return StoreShape(version, columns, schema, writable)


def check_readable(shape: StoreShape, shown: str) -> None:
    """Refuse a store this converge cannot read: a newer or unknown schema version
    (``SchemaVersionError``), or a table with columns the current schema does not
    know (``StoreError``, tables of another application)."""
    version = shape.version
    if version is not None and not (version.isdigit() and 1 <= int(version) <= SCHEMA_VERSION):
        raise SchemaVersionError(
            f"audit store {shown} has schema version {version}; "
            f"this converge understands version {SCHEMA_VERSION}"
        )
    for table in METADATA.sorted_tables:
        have = shape.columns.get(table.name)
        if have is None:
            continue
        extra = sorted(have - {c.name for c in table.columns})
        if extra:
            raise StoreError(
                f"cannot open audit store {shown}: its table {table.name!r} belongs "
                f"to another schema (unknown columns {extra})"
            )


def shadow_statements(shape: StoreShape, dialect: Any) -> list[str]:
    """The DDL giving a session the current schema over ``shape``: a temporary table
    per missing table, a temporary view per table missing columns (empty when the
    store is current)."""
    statements: list[str] = []
    for table in METADATA.sorted_tables:
        have = shape.columns.get(table.name)
        if have is None:
            statements.append(_temp_table(table, dialect))
        elif have != {c.name for c in table.columns}:
            statements.append(_temp_view(table, have, shape.schema, dialect.name))
    return statements


def _temp_table(table: Table, dialect: Any) -> str:
    ddl = str(CreateTable(table).compile(dialect=dialect)).strip()
    return ddl.replace("CREATE TABLE", "CREATE TEMPORARY TABLE", 1)


def _temp_view(table: Table, have: frozenset[str], schema: str, dialect: str) -> str:
    cells = []
    for column in table.columns:
        if column.name in have:
            cells.append(f'"{column.name}"')
        else:
            how = _FILLED.get((table.name, column.name), {}).get(dialect, "NULL")
            cells.append(f'{how} AS "{column.name}"')
    return (
        f'CREATE TEMPORARY VIEW "{table.name}" AS SELECT {", ".join(cells)} '
        f'FROM "{schema}"."{table.name}"'
    )


def install_shadows(engine: Engine, statements: Sequence[str]) -> None:
    """Run ``statements`` in every new session of ``engine`` (its ``connect`` event),
    and close the sessions opened before, so that each one has them."""
    if not statements:
        return
    postgres = engine.dialect.name == "postgresql"

    @event.listens_for(engine, "connect")
    def _shadow(dbapi_conn: Any, _record: Any) -> None:
        cur = dbapi_conn.cursor()
        try:
            for statement in statements:
                cur.execute(statement)
        finally:
            cur.close()
        if postgres:  # psycopg opened a transaction for them: temp objects outlive it
            dbapi_conn.commit()

    engine.dispose()
