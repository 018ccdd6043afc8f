"""Where the audit store lives: from ``--db``/``$CONVERGE_DB`` to a SQLAlchemy engine.

``None`` → ``$CONVERGE_DB`` → ``converge.db`` in the current directory; a plain
path is a SQLite file; anything with ``://`` is a SQLAlchemy URL (PostgreSQL via
``postgresql+psycopg://``). SQLite runs in WAL mode with a busy timeout and
``synchronous=NORMAL``; its write transactions start with ``BEGIN IMMEDIATE`` so
that concurrent writers queue instead of failing half-way.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError
from sqlalchemy.pool import StaticPool

from engine.errors import StoreError

DEFAULT_DB = "converge.db"
BUSY_TIMEOUT_S = 30.0
"""How long (seconds) a SQLite writer waits for another writer's lock."""

IDLE_TX_FLOOR_S = 10.0
"""The shortest ``idle_in_transaction_session_timeout`` (seconds) of a PostgreSQL store's
sessions: twice the lease (``CONVERGE_LEASE_S``), at least this."""

WRITE = "converge_write"
"""Execution option marking a connection whose transaction writes (``BEGIN IMMEDIATE``)."""


def resolve_url(url: str | None) -> str:
    """The SQLAlchemy URL for ``url`` (None → ``$CONVERGE_DB`` → ``converge.db``)."""
    if url is None or not url.strip():
        url = os.environ.get("CONVERGE_DB") or DEFAULT_DB
    url = url.strip()
    if url == ":memory:":
        return "sqlite://"
    if "://" in url:
        return url
    return "sqlite:///" + str(Path(url).expanduser().absolute())


def display_url(url: str) -> str:
    """The URL as shown in messages (password hidden; a SQLite file as its path)."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return url
    if parsed.get_backend_name() == "sqlite" and parsed.database:
        # a file opened read-only (read_only_sqlite) is still shown as its path
        if parsed.query.get("uri") == "true":
            return parsed.database.removeprefix("file:")
        return parsed.database
    return parsed.render_as_string(hide_password=True)


def _check_sqlite_path(parsed: URL, shown: str) -> None:
    path = parsed.database
    if not path or path == ":memory:" or path.startswith("file:"):
        return
    p = Path(path)
    parent = p.parent
    if p.is_dir():
        raise StoreError(f"cannot open audit store {shown}: it is a directory")
    if not parent.is_dir():
        raise StoreError(f"cannot open audit store {shown}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise StoreError(f"cannot open audit store {shown}: not writable")


def read_only_sqlite(url: str) -> str | None:
    """For a SQLite file that exists, the URL that opens it read-only (``mode=ro``;
    also ``immutable=1`` when the file or its directory cannot be written, or the file
    has no write permission bit (``chmod 444``, even for root), as for an auditor's
    archived copy, where SQLite could not create its WAL index); None for
    any other database or a file that does not exist."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return None
    path = parsed.database
    if parsed.get_backend_name() != "sqlite" or not path or path.startswith("file:"):
        return None
    p = Path(path)
    if not p.is_file():
        return None
    # a file with no write bit is write-protected, even for root (who may write it)
    protected = not p.stat().st_mode & 0o222
    writable = not protected and os.access(p, os.W_OK) and os.access(p.parent, os.W_OK)
    flags = "mode=ro" if writable else "mode=ro&immutable=1"
    return f"sqlite:///file:{p.as_posix()}?{flags}&uri=true"


def idle_tx_ms(env: dict[str, str] | None = None) -> int:
    """Milliseconds a PostgreSQL session may stay idle in a transaction: twice the
    lease of ``CONVERGE_LEASE_S`` (30 s when unset or unreadable), at least
    :data:`IDLE_TX_FLOOR_S`."""
    raw = (os.environ if env is None else env).get("CONVERGE_LEASE_S", "")
    try:
        lease = float(raw) if raw.strip() else 30.0
    except ValueError:
        lease = 30.0
    if not lease > 0 or lease == float("inf"):
        lease = 30.0
    return int(max(2 * lease, IDLE_TX_FLOOR_S) * 1000)


def make_engine(url: str) -> Engine:
    """A SQLAlchemy engine for ``url``; raises ``StoreError`` for a bad URL or path."""
    shown = display_url(url)
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise StoreError(f"cannot open audit store {shown}: not a database URL ({exc})") from exc
    backend = parsed.get_backend_name()
    kwargs: dict[str, Any] = {}
    read_only = backend == "sqlite" and parsed.query.get("mode") == "ro"
    if backend == "postgresql":
        # a session idle in a transaction (its host frozen, cut off) ends, its row
        # locks with it: the lease of the run it held can be claimed
        given = parsed.query.get("options", "")
        given = " ".join(given) if isinstance(given, tuple) else given
        if "idle_in_transaction_session_timeout" not in given:
            idle = f"-c idle_in_transaction_session_timeout={idle_tx_ms()}"
            kwargs["connect_args"] = {"options": f"{given} {idle}".strip()}
    if backend == "sqlite":
        if not read_only:
            _check_sqlite_path(parsed, shown)
        # transactions are driven by our BEGIN (immediate for writers), not pysqlite's
        kwargs["connect_args"] = {"timeout": BUSY_TIMEOUT_S, "isolation_level": None}
        if not parsed.database or parsed.database == ":memory:":
            kwargs["poolclass"] = StaticPool
            kwargs["connect_args"]["check_same_thread"] = False
    try:
        engine = create_engine(parsed, **kwargs)
    except (ArgumentError, NoSuchModuleError, ImportError, TypeError) as exc:
        raise StoreError(f"cannot open audit store {shown}: {exc}") from exc
    if backend == "sqlite":
        _configure_sqlite(engine, read_only=read_only)
    return engine


WAL_AUTOCHECKPOINT_PAGES = 4000
"""Pages (4 KiB) of WAL before SQLite checkpoints it into the database file."""


def _configure_sqlite(engine: Engine, *, read_only: bool = False) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        if read_only:  # a read-only file cannot change its journal mode
            cur.close()
            return
        cur.execute("PRAGMA journal_mode = WAL")
        cur.execute("PRAGMA synchronous = NORMAL")
        # checkpoint the WAL every ~16 MiB instead of 4 MiB: audited runs write in
        # bursts, and fewer, larger checkpoints cost less per event
        cur.execute(f"PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT_PAGES}")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        if conn.get_execution_options().get(WRITE, False):
            begin_immediate(conn.connection.dbapi_connection)
        else:
            conn.exec_driver_sql("BEGIN")


LOCK_POLL_S = (0.0002, 0.002)
"""First and longest pause (seconds) between two tries at SQLite's write lock."""


def begin_immediate(raw: Any, timeout_s: float = BUSY_TIMEOUT_S) -> None:
    """``BEGIN IMMEDIATE`` on a pysqlite connection, polling for the write lock every
    0.2-2 ms for up to ``timeout_s`` seconds.

    SQLite's own busy handler sleeps 1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50 then 100
    ms between tries, so a writer that misses a busy lock a few times waits 100 ms
    or more after it was freed (an approval behind workers' commits: the approval
    latency's p99 in docs/performance.md). Raises ``sqlite3.OperationalError`` after ``timeout_s``.
    """
    cur = raw.cursor()
    try:
        cur.execute("PRAGMA busy_timeout = 0")
        pause, longest = LOCK_POLL_S
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                cur.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
                if time.monotonic() >= deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, longest)
    finally:
        cur.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        cur.close()
