"""What tests of the audit store use: throwaway databases (PostgreSQL schemas) and
fault injection (die like ``kill -9`` after the Nth write).

``CONVERGE_TEST_PG_URL`` names the server (default
``postgresql+psycopg://postgres@127.0.0.1:5432/test``). :func:`pg_schema` creates a
fresh schema and yields a URL whose ``search_path`` points at it, so that parallel
test runs never see each other's tables; the schema is dropped afterwards.

With ``$CONVERGE_FAULT_KILL_AFTER_WRITES=N`` set, the process sends itself SIGKILL
right after its Nth committed write transaction to the audit store (any thread),
so a test can sweep every event boundary of a command deterministically: N = 1, 2,
... until the command finishes before being killed. Unset (the default), this
costs one comparison per write transaction (:func:`after_write_commit`).
"""

from __future__ import annotations

import os
import signal
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import quote

from sqlalchemy import create_engine, text
from sqlalchemy.exc import SQLAlchemyError

PG_URL_ENV = "CONVERGE_TEST_PG_URL"
DEFAULT_PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def pg_url() -> str:
    """The test server's URL (``$CONVERGE_TEST_PG_URL`` or the default)."""
    return os.environ.get(PG_URL_ENV) or DEFAULT_PG_URL


def pg_unreachable_reason() -> str | None:
    """None when the test server answers, else why not (one line)."""
    try:
        engine = create_engine(pg_url(), connect_args={"connect_timeout": 3})
        try:
            with engine.connect() as conn:
                conn.execute(text("SELECT 1"))
        finally:
            engine.dispose()
    except (SQLAlchemyError, ImportError) as exc:
        return f"PostgreSQL at {pg_url()} unreachable: {str(exc).splitlines()[0]}"
    return None


@contextmanager
def pg_schema(prefix: str = "converge_test") -> Iterator[str]:
    """Create a fresh schema; yield a URL using it; drop it (cascade) afterwards."""
    base = pg_url()
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE SCHEMA "{name}"'))
        sep = "&" if "?" in base else "?"
        yield f"{base}{sep}options={quote(f'-csearch_path={name}')}"
    finally:
        try:
            with admin.connect() as conn:
                conn.execute(text(f'DROP SCHEMA IF EXISTS "{name}" CASCADE'))
        finally:
            admin.dispose()


# -- fault injection ------------------------------------------------------------------
KILL_AFTER_WRITES_ENV = "CONVERGE_FAULT_KILL_AFTER_WRITES"
"""The environment variable naming N (a positive integer); read once per process."""

_raw = os.environ.get(KILL_AFTER_WRITES_ENV, "").strip()
_KILL_AFTER = int(_raw) if _raw.isdigit() and int(_raw) > 0 else 0
_lock = threading.Lock()
_count = [0]


def writes_committed() -> int:
    """How many write transactions this process committed to audit stores."""
    return _count[0]


def after_write_commit() -> None:
    """Count one committed write transaction; SIGKILL this process at the Nth."""
    with _lock:
        _count[0] += 1
        if _KILL_AFTER and _count[0] >= _KILL_AFTER:
            os.kill(os.getpid(), signal.SIGKILL)
