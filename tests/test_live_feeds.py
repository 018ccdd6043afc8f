"""The streams' follower learns of commits from the store (issue 58, L1): PostgreSQL
notifies, SQLite's change counter moves; idle streams read nothing; streams are
capped per token (429) and in all (503), with ``Retry-After``."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from audit import open_store
from audit.people import add_token
from audit.store import SqlRunStore
from converge.web import create_app
from converge.web.commits import NotifiedCommits, SqliteCommits, commit_watch
from converge.web.feeds import StreamCaps
from tests.hitlfixtures import STORES, store_url_for
from tests.webfixtures import quorum_job, run_job, served


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqlRunStore]:
    with store_url_for(request.param, tmp_path) as url:
        s = open_store(url)
        try:
            yield s
        finally:
            s.close()


def test_the_follower_hears_of_another_process_commit_and_of_nothing_else(
    store: SqlRunStore,
) -> None:
    watch = commit_watch(store, poll_s=0.01)
    kind = NotifiedCommits if store.is_postgres else SqliteCommits
    assert isinstance(watch, kind)
    other = open_store(store.url)  # another connection, as another process would be

    commit = threading.Timer(0.05, lambda: run_job(quorum_job(1), other))

    async def listen() -> tuple[set[str] | None, set[str] | None, float]:
        quiet = await watch.changed(0.3)
        started = time.monotonic()
        commit.start()
        heard = await watch.changed(10.0)
        return quiet, heard, time.monotonic() - started

    try:
        quiet, heard, took = asyncio.run(listen())
    finally:
        watch.close()
        if commit.is_alive():
            commit.join(30)  # the other process's run done before its store closes
        other.close()
    assert quiet == set()  # nothing committed: nothing heard, no read asked for
    assert heard is None or len(heard) >= 1  # SQLite: "something"; PostgreSQL: the run
    assert took < 5.0


def _open(base: str, token: str, run_id: str, opened: list[httpx.Response]) -> None:
    client = httpx.Client(timeout=30)
    answer = client.send(
        client.build_request(
            "GET", f"{base}/api/runs/{run_id}/events", headers={"Authorization": f"Bearer {token}"}
        ),
        stream=True,
    )
    opened.append(answer)


def test_streams_past_the_caps_are_answered_429_per_token_and_503_in_all(
    store: SqlRunStore,
) -> None:
    paused = run_job(quorum_job(1), store).run_id
    alice, bob = add_token(store, "alice"), add_token(store, "bob")
    app = create_app(store, stream_caps=StreamCaps(per_token=2, total=3, retry_after_s=7))
    opened: list[httpx.Response] = []
    with served(store, app) as base:
        try:
            for token in (alice, alice, alice, bob, bob):
                _open(base, token, paused, opened)
            codes = [r.status_code for r in opened]
            assert codes == [200, 200, 429, 200, 503], codes
            assert opened[2].headers["Retry-After"] == "7" == opened[4].headers["Retry-After"]
            assert "close one first" in opened[2].read().decode()
            opened[0].close()  # one of alice's ends: room for another
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                _open(base, alice, paused, opened)
                if opened[-1].status_code == 200:
                    break
                opened[-1].close()
                time.sleep(0.05)
            assert opened[-1].status_code == 200
        finally:
            for r in opened:
                r.close()
