"""A worker's health and metrics for Kubernetes and systemd (issue 57, part A, item 2).

The real ``converge worker --health-port N`` on RabbitMQ (``$CONVERGE_TEST_BROKER``)
answers ``/healthz``, turns ``/readyz`` 200 once its Celery consumer started, and
serves ``/metrics`` summed over its prefork pool processes: the runs they executed
are counted as the store recorded them. SIGTERM stops it within 10 s. Without a
broker, or draining, ``/readyz`` is 503 and says nothing more.
"""

from __future__ import annotations

import signal
import time
import uuid
from pathlib import Path

import httpx
import pytest

from audit import open_store
from converge.jobs import load_job
from converge.service import submit_run
from converge.service.readiness import Readiness
from converge.workers import CeleryRunQueue
from converge.workers.health import HealthServer, broker_reachable, store_answers
from engine.status import RunStatus
from tests.faultfixtures import ticking_job
from tests.metricsfixtures import (
    ALLOWED_LABELS,
    events_of_kind,
    health_worker,
    label_names,
    promtool,
    scrape,
    total,
    value,
)
from tests.realserve import STOP_WITHIN_S, free_port
from tests.servicefixtures import until
from tests.workerfixtures import BROKER, services_unreachable

RUNS = 3


@pytest.fixture
def broker() -> str:
    reason = services_unreachable()
    if reason is not None:
        pytest.fail(reason)  # CI never skips for RabbitMQ (tests/README)
    return BROKER


def test_a_worker_serves_its_probes_and_the_metrics_of_its_pool_processes(
    tmp_path: Path, broker: str
) -> None:
    url = f"sqlite:///{tmp_path / 'worker.db'}"
    open_store(url).close()
    queue, port = f"converge-ops-{uuid.uuid4().hex[:10]}", free_port()
    log = tmp_path / "worker.log"
    job = load_job(ticking_job(tmp_path / "ticking.yaml", max_cycles=3))
    with health_worker(url, queue, log, port) as proc:
        base = f"http://127.0.0.1:{port}"
        live = httpx.get(f"{base}/healthz", timeout=5)
        assert live.status_code == 200 and live.text == "ok\n"
        assert httpx.get(f"{base}/readyz", timeout=5).text == "ready\n"
        store, runs = open_store(url), CeleryRunQueue(broker, queue)
        try:
            ids = [submit_run(job, store, runs) for _ in range(RUNS)]
            until(
                lambda: all(store.run(r).status == RunStatus.STOPPED for r in ids),
                timeout=60,
                what=lambda: log.read_text()[-2000:],
            )
        finally:
            runs.close()
            store.close()
        text = scrape(base)  # the port asks no token: a private interface
        signalled = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        try:
            after = httpx.get(f"{base}/readyz", timeout=2).status_code
        except httpx.HTTPError:
            after = None  # already gone: not ready either
        code = proc.wait(timeout=STOP_WITHIN_S)
        stopped_in = time.monotonic() - signalled

    assert value(text, "converge_runs_started_total") == RUNS
    assert (
        value(text, "converge_runs_stopped_total", kind="cycle_budget_exhausted", category="budget")
        == RUNS
    )
    assert value(text, "converge_cycles_total") == events_of_kind(url, "cycle_started")
    assert total(text, "converge_suggestor_seconds_count") == events_of_kind(
        url, "suggestor_executed"
    )
    assert label_names(text) <= ALLOWED_LABELS
    checked = promtool("check", "metrics", stdin=text)
    assert checked.returncode == 0 and checked.stdout + checked.stderr == "", checked
    assert after != 200
    assert code == 0 and stopped_in < STOP_WITHIN_S, log.read_text()[-2000:]


def test_readyz_is_503_without_a_broker_or_while_draining_and_says_nothing_more(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'probe.db'}"
    open_store(url).close()
    readiness = Readiness({"store": store_answers(url)})
    server = HealthServer(readiness, lambda: b"converge_up 1\n").start()
    base = f"http://127.0.0.1:{server.port}"
    try:
        assert httpx.get(f"{base}/readyz").status_code == 200
        readiness.add("broker", broker_reachable("amqp://guest:guest@127.0.0.1:1//", 0.5))
        refused = httpx.get(f"{base}/readyz")
        assert refused.status_code == 503 and refused.text == "not ready\n"
        assert httpx.get(f"{base}/healthz").status_code == 200
        assert httpx.get(f"{base}/metrics").text == "converge_up 1\n"
        assert httpx.get(f"{base}/nothing").status_code == 404
        readiness.checks.pop("broker")
        assert httpx.get(f"{base}/readyz").status_code == 200
        readiness.drain()
        assert httpx.get(f"{base}/readyz").status_code == 503
    finally:
        server.stop()
