"""Which runs' heads moved: the store's commits, learnt without reading the runs.

- PostgreSQL: a trigger on ``runs`` (made by the first server that needs it) sends
  ``NOTIFY converge_runs, 'SCHEMA RUN_ID'`` when a run's head or status moves, in the
  committing transaction, whichever process commits; the server ``LISTEN``\\s on one
  connection of its own (:class:`NotifiedCommits`), so idle streams cost nothing.
- SQLite: ``PRAGMA data_version`` on one connection of the server's own changes when
  any other connection commits (:class:`SqliteCommits`): a look every ``poll_s``,
  microseconds each, and a query only when something was committed.
- Anything else, or a database that refuses the trigger: every ``poll_s``, "maybe"
  (:class:`PolledCommits`): the follower then asks the heads of the streamed runs,
  one query for all of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import threading
from typing import Protocol

from sqlalchemy import text

from audit.store import SqlRunStore

__all__ = [
    "CHANNEL",
    "CommitWatch",
    "NotifiedCommits",
    "PolledCommits",
    "SqliteCommits",
    "commit_watch",
]

CHANNEL = "converge_runs"
"""The PostgreSQL notification channel of the runs' moves."""
log = logging.getLogger("converge.web")

TRIGGER = f"""
CREATE OR REPLACE FUNCTION converge_run_moved() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('{CHANNEL}', TG_TABLE_SCHEMA || ' ' || NEW.run_id);
    RETURN NULL;
END $$ LANGUAGE plpgsql;
CREATE OR REPLACE TRIGGER converge_run_moved
    AFTER INSERT OR UPDATE OF last_seq, status ON runs
    FOR EACH ROW EXECUTE FUNCTION converge_run_moved();
"""
"""The notifying trigger (PostgreSQL 14+: ``CREATE OR REPLACE TRIGGER``)."""


class CommitWatch(Protocol):
    """What the follower of a server's streams waits on."""

    async def changed(self, timeout: float) -> set[str] | None:
        """The ids of the runs whose head moved since the last call (None: maybe any
        run, ask them all), after at most ``timeout`` seconds (then an empty set
        when nothing was learnt)."""
        ...

    def close(self) -> None:
        """Stop watching."""
        ...


class PolledCommits:
    """No way to learn of commits: "maybe any" every ``poll_s`` seconds."""

    def __init__(self, poll_s: float) -> None:
        self.poll_s = poll_s

    async def changed(self, timeout: float) -> set[str] | None:
        await asyncio.sleep(self.poll_s)
        return None

    def close(self) -> None:
        return None


class SqliteCommits:
    """SQLite's change counter of the file at ``path``, looked at every ``poll_s``."""

    def __init__(self, path: str, poll_s: float) -> None:
        self.poll_s = poll_s
        self._conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        self._version = self._read()

    def _read(self) -> int:
        row = self._conn.execute("PRAGMA data_version").fetchone()
        return int(row[0])

    async def changed(self, timeout: float) -> set[str] | None:
        loop = asyncio.get_running_loop()
        until = loop.time() + timeout
        while loop.time() < until:
            await asyncio.sleep(self.poll_s)
            version = self._read()  # microseconds: no thread hop
            if version != self._version:
                self._version = version
                return None
        return set()

    def close(self) -> None:
        self._conn.close()


class NotifiedCommits:
    """PostgreSQL's notifications of the runs' moves in ``schema``, received by a
    thread on a connection of its own (``conninfo``)."""

    def __init__(self, conninfo: str, schema: str) -> None:
        import psycopg

        self.schema = schema
        self._conn = psycopg.connect(conninfo, autocommit=True)
        self._conn.execute(f"LISTEN {CHANNEL}")
        self._moved: set[str] = set()
        self._signal: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._receive, name="converge-listen", daemon=True)
        self._thread.start()

    def _receive(self) -> None:
        while not self._stop.is_set():
            try:
                for note in self._conn.notifies(timeout=0.5):
                    schema, _, run_id = note.payload.partition(" ")
                    if schema == self.schema and self._loop is not None:
                        self._loop.call_soon_threadsafe(self._note, run_id)
            except Exception as exc:  # the connection broke: the follower polls instead
                if not self._stop.is_set():
                    log.warning("live: LISTEN %s ended: %s", CHANNEL, exc)
                    self._moved_any()
                return

    def _note(self, run_id: str) -> None:
        self._moved.add(run_id)
        if self._signal is not None:
            self._signal.set()

    def _moved_any(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._note, "*")

    async def changed(self, timeout: float) -> set[str] | None:
        if self._signal is None:
            self._loop = asyncio.get_running_loop()
            self._signal = asyncio.Event()
        if not self._moved:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._signal.wait(), timeout)
        self._signal.clear()
        moved, self._moved = self._moved, set()
        if "*" in moved or not self._thread.is_alive():
            return None
        return moved

    def close(self) -> None:
        self._stop.set()
        with contextlib.suppress(Exception):
            self._conn.close()


def commit_watch(store: SqlRunStore, poll_s: float) -> CommitWatch:
    """The best way ``store`` tells of its commits (see the module); falls back to
    polling (logged once) when the database refuses the others."""
    engine = store.sql_engine
    try:
        if engine.dialect.name == "sqlite" and engine.url.database not in (None, "", ":memory:"):
            path = str(engine.url.database).removeprefix("file:").split("?")[0]
            return SqliteCommits(path, poll_s)
        if engine.dialect.name == "postgresql":
            with store.transaction() as conn:
                schema = str(conn.execute(text("SELECT current_schema()")).scalar())
                conn.execute(text(TRIGGER))
            conninfo = engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
            return NotifiedCommits(conninfo, schema)
    except Exception as exc:  # no trigger, no file: one heads query a tick instead
        log.warning("live: the store cannot tell its commits (%s): polling instead", exc)
    return PolledCommits(poll_s)
