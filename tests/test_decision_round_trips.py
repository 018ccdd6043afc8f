"""An approval through the HTTP API costs few database round trips (issue 46, S1).

``POST /api/gates/{id}/decision`` by a token-authenticated approver, its resume sent
to a queue (as ``converge serve`` with workers): what the request's own thread
sends to the database is counted, from the token's check to the answer. On
PostgreSQL a *round trip* is a statement (SQLAlchemy's ``before_cursor_execute``)
or a command psycopg sends on its own (``BEGIN``, ``COMMIT``, ``ROLLBACK``: its
``_exec_command``); a command psycopg skips (a commit with no transaction open)
costs nothing and is not counted. On SQLite the statements and the transactions'
begins and commits are counted the same way (no network, but the same work).

Before issue 46's second pass one approval took 22 statements in 9 transactions
(40 round trips on PostgreSQL, 44 on SQLite where the ledger integrates the run's head
in the request's thread): the token, the key check, a catalog query for the
people table, each in a transaction of its own; the decider in 4 statements; the
gate re-read after its update; the answer's report in 4 more transactions
re-reading the run, its job and its votes. Now a read of one statement (the token,
the key, the catalog) runs in autocommit, one round trip; the answer is built from
what the decision recorded and was checked against, with the run and its comments
read in one transaction: 25 round trips on PostgreSQL, 35 on SQLite. The
failed-sign-in limit counted in the store, so that every server of one store limits
a client as one (issue 54), adds one statement before the token's (26 and 38; the
person's groups come with the token in its one statement).
:data:`MAX_ROUND_TRIPS` pins the counts so that they cannot grow back.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event

from audit.people import add_token
from audit.store import SqlRunStore
from converge.web import create_app
from tests.webfixtures import quorum_job, run_job

MAX_ROUND_TRIPS = {"postgresql": 26, "sqlite": 38}
"""Round trips of one approval, decision and answer (see the module's docstring)."""


class NotingQueue:
    """A run queue that only notes what it is sent."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    def send(self, run_id: str, action: str = "run") -> None:
        self.sent.append((run_id, action))


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqlRunStore]:
    from tests.hitlfixtures import opened_store

    yield from opened_store(request.param, tmp_path)


@contextmanager
def counted(store: SqlRunStore, thread: threading.Thread | None = None) -> Iterator[list[str]]:
    """The round trips sent from the threads other than the store's own (its writer,
    its ledger's sequencer), as they happen."""
    sent: list[str] = []
    own = ("converge",)

    def note(what: str) -> None:
        if not threading.current_thread().name.startswith(own):
            sent.append(what)

    def before(_c: Any, _cur: Any, stmt: str, *_a: Any) -> None:
        if stmt != "BEGIN":  # SQLite: our read BEGIN, counted with the begin event
            note(" ".join(stmt.split())[:120])

    engine = store.sql_engine
    undo: list[Callable[[], None]] = []
    event.listen(engine, "before_cursor_execute", before)
    undo.append(lambda: event.remove(engine, "before_cursor_execute", before))
    if store.is_postgres:
        from psycopg._connection_base import BaseConnection

        real = BaseConnection._exec_command

        def command(self: Any, cmd: Any, *a: Any, **k: Any) -> Generator[Any, Any, Any]:
            note(str(cmd))
            return (yield from real(self, cmd, *a, **k))

        BaseConnection._exec_command = command  # type: ignore[assignment,method-assign]
        undo.append(lambda: setattr(BaseConnection, "_exec_command", real))
    else:
        for name in ("begin", "commit", "rollback"):

            def on(_c: Any, _n: str = name) -> None:
                note(_n.upper())

            event.listen(engine, name, on)
            undo.append(lambda n=name, f=on: event.remove(engine, n, f))  # type: ignore[misc]
    try:
        yield sent
    finally:
        for u in undo:
            u()


def _approve(store: SqlRunStore, client: TestClient, token: str, gate_id: str) -> dict[str, Any]:
    answer = client.post(
        f"/api/gates/{gate_id}/decision",
        json={"approved": True, "reason": "looks fine"},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert answer.status_code == 202, answer.text
    out: dict[str, Any] = answer.json()
    return out


def test_an_approval_over_http_takes_few_round_trips(store: SqlRunStore) -> None:
    for _ in range(2):
        run_job(quorum_job(1), store)
    first, second = (g.gate_id for g in store.gates(pending=True))
    token = add_token(store, "alice")
    queue = NotingQueue()
    client = TestClient(create_app(store, run_queue=queue))
    _approve(store, client, token, first)  # the first creates what the inbox needs
    with counted(store) as sent:
        out = _approve(store, client, token, second)
    kind = "postgresql" if store.is_postgres else "sqlite"
    shown = f"{len(sent)} round trips on {kind}:\n" + "\n".join(sent)
    if os.environ.get("CONVERGE_SHOW_ROUND_TRIPS"):
        print(shown)
    assert len(sent) <= MAX_ROUND_TRIPS[kind], shown
    # the answer is the decision as recorded
    gate = store.get_gate(second)
    assert (out["status"], out["decided_by"], out["reason"]) == ("approved", "alice", "looks fine")
    assert out["decided_at"] == gate.decided_at
    assert out["run"]["run_id"] == gate.run_id
    assert queue.sent[-1] == (gate.run_id, "resume")
