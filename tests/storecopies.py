"""One store per trial: fresh stores and exact copies of a store, SQLite and PostgreSQL.

A trial of the exactly-once tests kills or races processes on its own copy of a
prepared store (a paused or a budget-stopped run), so every trial starts from the
same state. SQLite: a file copied with the backup API. PostgreSQL: a schema per
store on ``$CONVERGE_TEST_PG_URL`` (``audit.testing.pg_url``); a copy is a fresh
schema whose tables the store creates itself (``open_store``: its own indexes,
under their own names), filled from the original's rows. Every schema is dropped
by :meth:`PgStores.discard` or :meth:`PgStores.close`.
"""

from __future__ import annotations

import sqlite3
import uuid
from contextlib import closing
from pathlib import Path
from typing import Protocol
from urllib.parse import quote

from sqlalchemy import Connection, Engine, create_engine, text
from sqlalchemy.pool import NullPool

from audit import open_store
from audit.testing import pg_url
from audit.url import resolve_url

__all__ = ["PgStores", "SqliteStores", "Stores", "sql_engine"]


def sql_engine(url: str) -> Engine:
    """A plain SQLAlchemy engine on a store (a SQLite path or a URL), no pooling:
    for the tests' own reads and edits. Dispose it after use."""
    return create_engine(resolve_url(url), poolclass=NullPool)


class Stores(Protocol):
    """Where the trials' stores live."""

    kind: str

    def fresh(self) -> str:
        """The URL (or SQLite path) of a new, empty store."""
        ...

    def copy(self, url: str) -> str:
        """A new store holding exactly what the store at ``url`` holds."""
        ...

    def discard(self, url: str) -> None:
        """Remove a store made here (its file, or its schema)."""
        ...

    def close(self) -> None:
        """Remove every store made here that is left."""
        ...


class SqliteStores:
    """SQLite files in one directory."""

    kind = "sqlite"

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self._root = root
        self._made: list[str] = []

    def fresh(self) -> str:
        path = str(self._root / f"store{len(self._made) + 1}.db")
        self._made.append(path)
        return path

    def copy(self, url: str) -> str:
        dst = self.fresh()
        with closing(sqlite3.connect(url)) as a, closing(sqlite3.connect(dst)) as b:
            a.backup(b)
        return dst

    def discard(self, url: str) -> None:
        for suffix in ("", "-wal", "-shm"):
            Path(url + suffix).unlink(missing_ok=True)

    def close(self) -> None:
        for url in self._made:
            self.discard(url)
        self._made.clear()


class PgStores:
    """One PostgreSQL schema per store, named ``PREFIX_<random>``."""

    kind = "postgresql"

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._base = pg_url()
        self._admin = create_engine(self._base, poolclass=NullPool, isolation_level="AUTOCOMMIT")
        self._schemas: dict[str, str] = {}
        self._made: frozenset[str] | None = None
        self._columns: dict[tuple[str, str], str] = {}  # (schema, table): quoted columns

    def _url(self, schema: str) -> str:
        sep = "&" if "?" in self._base else "?"
        return f"{self._base}{sep}options={quote(f'-csearch_path={schema}')}"

    def fresh(self) -> str:
        schema = f"{self._prefix}_{uuid.uuid4().hex[:12]}"
        with self._admin.connect() as conn:
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
        url = self._url(schema)
        self._schemas[url] = schema
        return url

    def copy(self, url: str) -> str:
        src = self._schemas[url]
        dst_url = self.fresh()
        dst = self._schemas[dst_url]
        open_store(dst_url).close()  # the store's own DDL: tables, indexes and their names
        with self._admin.connect() as conn:
            if self._made is None:  # what the store's DDL makes: the same every time
                self._made = frozenset(_tables(conn, dst))
            statements = []
            for table in _tables(conn, src):
                key = (src, table)
                if key not in self._columns:  # a template is copied many times
                    self._columns[key] = ", ".join(f'"{c}"' for c in _columns(conn, src, table))
                columns, made = self._columns[key], table in self._made
                if made:
                    statements.append(f'DELETE FROM "{dst}"."{table}"')
                else:  # made on first use (the inbox's tables)
                    statements.append(
                        f'CREATE TABLE "{dst}"."{table}" (LIKE "{src}"."{table}" INCLUDING ALL)'
                    )
                statements.append(
                    f'INSERT INTO "{dst}"."{table}" ({columns}) '
                    f'SELECT {columns} FROM "{src}"."{table}"'
                )
            conn.exec_driver_sql("; ".join(statements))  # one round trip
        return dst_url

    def discard(self, url: str) -> None:
        schema = self._schemas.pop(url, None)
        if schema is not None:
            with self._admin.connect() as conn:
                conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))

    def close(self) -> None:
        try:
            for url in list(self._schemas):
                self.discard(url)
        finally:
            self._admin.dispose()


def _tables(conn: Connection, schema: str) -> list[str]:
    rows = conn.execute(
        text("SELECT tablename FROM pg_tables WHERE schemaname = :s ORDER BY tablename"),
        {"s": schema},
    )
    return [str(r[0]) for r in rows]


def _columns(conn: Connection, schema: str, table: str) -> list[str]:
    rows = conn.execute(
        text(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_schema = :s AND table_name = :t ORDER BY ordinal_position"
        ),
        {"s": schema, "t": table},
    )
    return [str(r[0]) for r in rows]
