"""Health and readiness of ``converge serve`` (issue 57, part A, item 1; docs/operations.md).

``GET /healthz`` and ``GET /readyz`` answer without a token and say one word; /readyz
turns 503 when the store does not answer with the current schema, when the run
pool stops taking runs, and from SIGTERM on, while the real server still takes
requests for ``--drain-seconds`` and then exits within 10 s. ``GET /metrics`` asks
the access policy (an admin's token) unless ``--metrics`` opens it.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

from audit import open_store
from audit.people import add_token
from audit.store import SqlRunStore
from audit.tables import meta
from converge.access import MetricsAccess, metrics_open
from converge.service import LocalRunPool
from converge.service.readiness import Readiness, store_current
from converge.web import create_app
from tests.realserve import STOP_WITHIN_S, served_cli

SECRETS = ("sqlite", "postgresql", "Traceback", "version", "/", "schema", "Error")
"""What a probe's body must not say to a stranger (a URL, a path, a version, an error)."""


@pytest.fixture
def store(tmp_path: Path) -> SqlRunStore:
    made = open_store(str(tmp_path / "ops.db"))
    yield made  # type: ignore[misc]
    made.close()


def _says_nothing_more(body: str, word: str) -> None:
    assert body.strip() == word
    assert not any(s in body for s in SECRETS), body


def test_the_probes_answer_without_a_token_with_one_word(store: SqlRunStore) -> None:
    client = TestClient(create_app(store))

    live, ready = client.get("/healthz"), client.get("/readyz")

    assert live.status_code == 200 and ready.status_code == 200
    _says_nothing_more(live.text, "ok")
    _says_nothing_more(ready.text, "ready")
    assert ready.headers["cache-control"] == "no-store"


def test_readyz_is_503_when_the_store_has_another_schema_and_says_not_why(
    store: SqlRunStore,
) -> None:
    client = TestClient(create_app(store))
    assert client.get("/readyz").status_code == 200
    with store.transaction() as conn:
        conn.execute(update(meta).where(meta.c.key == "schema_version").values(value="999"))

    answer = client.get("/readyz")

    assert answer.status_code == 503
    _says_nothing_more(answer.text, "not ready")
    assert client.get("/healthz").status_code == 200  # alive, not ready


def test_readyz_is_503_once_the_run_pool_stops_taking_runs(store: SqlRunStore) -> None:
    pool = LocalRunPool(store, 1)
    readiness = Readiness({"store": store_current(store), "pool": lambda: pool.accepting})
    client = TestClient(create_app(store, run_queue=pool, readiness=readiness))
    assert client.get("/readyz").status_code == 200

    pool.close()

    assert client.get("/readyz").status_code == 503


def test_a_check_that_raises_is_not_ready_and_draining_is_for_good() -> None:
    def broken() -> bool:
        raise OSError("connection refused to amqp://guest:secret@10.0.0.1//")

    assert not Readiness({"broker": broken}).ready()
    readiness = Readiness({"ok": lambda: True})
    assert readiness.ready()
    readiness.drain()
    assert not readiness.ready() and readiness.draining


def test_metrics_need_an_admins_token_by_default(store: SqlRunStore) -> None:
    client = TestClient(create_app(store))
    admin, viewer = add_token(store, "ada", "admin"), add_token(store, "vic", "viewer")

    assert client.get("/metrics").status_code == 401
    refused = client.get("/metrics", headers={"Authorization": f"Bearer {viewer}"})
    assert refused.status_code == 403 and "may not read the metrics" in refused.text
    read = client.get("/metrics", headers={"Authorization": f"Bearer {admin}"})
    assert read.status_code == 200
    assert read.headers["content-type"].startswith("text/plain; version=")
    assert "# TYPE converge_runs_started_total counter" in read.text


def test_metrics_public_opens_them_and_local_opens_them_to_loopback_only(
    store: SqlRunStore,
) -> None:
    public = TestClient(create_app(store, metrics_access=MetricsAccess.PUBLIC))
    assert public.get("/metrics").status_code == 200
    local = TestClient(create_app(store, metrics_access=MetricsAccess.LOCAL))
    assert local.get("/metrics").status_code == 401  # the test client is no loopback peer
    assert metrics_open(MetricsAccess.LOCAL, "127.0.0.1")
    assert metrics_open(MetricsAccess.LOCAL, "::1")
    assert not metrics_open(MetricsAccess.LOCAL, "10.1.2.3")
    assert not metrics_open(MetricsAccess.TOKEN, "127.0.0.1")


def test_sigterm_turns_readyz_false_while_the_server_still_answers_then_it_exits(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'served.db'}"
    prepared = open_store(url)
    admin = add_token(prepared, "ada", "admin")
    prepared.close()
    auth = {"Authorization": f"Bearer {admin}"}
    drain_s = 3.0
    with (
        served_cli(url, tmp_path / "serve.log", "--drain-seconds", str(drain_s)) as served,
        httpx.Client(base_url=served.base, timeout=5) as kept,  # a kept-alive connection
    ):
        assert kept.get("/readyz").status_code == 200
        assert kept.get("/api/gates", headers=auth).status_code == 200
        signalled = time.monotonic()
        served.proc.send_signal(signal.SIGTERM)

        not_ready = kept.get("/readyz")  # on the connection opened before
        fresh = httpx.get(f"{served.base}/readyz", timeout=5)  # and on a new one
        during = kept.get("/api/gates", headers=auth)
        answered_at = time.monotonic() - signalled

        assert not_ready.status_code == 503 and not_ready.text.strip() == "not ready"
        assert fresh.status_code == 503
        assert during.status_code == 200, during.text  # requests still served
        assert answered_at < drain_s, answered_at
        code = served.proc.wait(timeout=STOP_WITHIN_S)
        stopped_in = time.monotonic() - signalled
    assert code == 0, served.output()[-3000:]
    assert drain_s <= stopped_in < STOP_WITHIN_S, stopped_in
