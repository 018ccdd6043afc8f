"""Draw docs/images/prometheus-graph.png: Prometheus' graph page, in headless
Chromium, over a ``converge serve`` and a ``converge worker`` whose runs stop by
budget and by success while gates wait (docs/operations.md).

Run once, from the repository root, with RabbitMQ on ``$CONVERGE_TEST_BROKER``
(default amqp://guest:guest@127.0.0.1:5672//) and Debian's prometheus and chromium::

    PYTHONPATH=. .venv/bin/python docs/hooks/prometheus_screenshot.py

It reuses the test suite's helpers (tests/metricsfixtures.py): the same scrape
configuration and rules as tests/test_operations_prometheus.py.
"""

from __future__ import annotations

import sys
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from audit import open_store  # noqa: E402
from audit.people import add_token  # noqa: E402
from converge.jobs import load_job  # noqa: E402
from converge.service import submit_run  # noqa: E402
from converge.workers import CeleryRunQueue  # noqa: E402
from tests.faultfixtures import gated_job, ticking_job  # noqa: E402
from tests.metricsfixtures import (  # noqa: E402
    Target,
    health_worker,
    prometheus_server,
    query,
    queue_jobs,
    until,
)
from tests.realserve import free_port, served_cli  # noqa: E402
from tests.workerfixtures import BROKER  # noqa: E402

OUT = ROOT / "docs" / "images" / "prometheus-graph.png"
EXPR = "sum by (category) (rate(converge_runs_stopped_total[1m]))"
ROUNDS = 6
"""Rounds of runs, a few seconds apart, so that the graph has a shape."""


def main() -> None:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        url = f"sqlite:///{work / 'shot.db'}"
        store = open_store(url)
        admin, approver = add_token(store, "ada", "admin"), add_token(store, "abe", "approver")
        store.close()
        (work / "token").write_text(admin)
        ticking = ticking_job(work / "ticking.yaml", max_cycles=3)
        gated = gated_job(work / "gated.yaml", steps=2)
        queue, port = f"converge-shot-{uuid.uuid4().hex[:8]}", free_port()
        with (
            served_cli(url, work / "serve.log", "--pool", "2") as served,
            health_worker(url, queue, work / "worker.log", port),
        ):
            targets = [
                Target("converge-serve", served.base.removeprefix("http://"), work / "token"),
                Target("converge-workers", f"127.0.0.1:{port}"),
            ]
            with prometheus_server(work, targets) as prom:
                until(lambda: len(query(prom, "up == 1")) == 2, 60, "targets up")
                _runs(url, served.base, approver, queue, ticking, gated)
                time.sleep(5)  # the last scrapes reach the graph
                _shoot(sync_playwright, prom)
    print(f"wrote {OUT.relative_to(ROOT)}")


def _runs(url: str, base: str, approver: str, queue: str, ticking: Path, gated: Path) -> None:
    import httpx

    auth = {"Authorization": f"Bearer {approver}"}
    job = load_job(ticking)
    for i in range(ROUNDS):
        queue_jobs(url, ticking, 1 + i % 3)
        queue_jobs(url, gated, 1)
        store, runs = open_store(url), CeleryRunQueue(BROKER, queue)
        try:
            submit_run(job, store, runs)
        finally:
            runs.close()
            store.close()
        time.sleep(4)
        for gate in httpx.get(f"{base}/api/gates?status=pending", headers=auth).json():
            httpx.post(
                f"{base}/api/gates/{gate['gate_id']}/decision",
                json={"approved": True, "value": "MIT"},
                headers=auth,
            )


def _shoot(sync_playwright: object, prom: str) -> None:
    params = {"g0.expr": EXPR, "g0.tab": "0", "g0.range_input": "1m", "g0.stacked": "0"}
    with sync_playwright() as pw:  # type: ignore[operator]
        browser = pw.chromium.launch(
            executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"]
        )
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        page.goto(f"{prom}/graph?{urlencode(params)}")
        page.wait_for_selector("canvas, .graph-chart, svg", timeout=30_000)
        time.sleep(2)  # the chart's drawing settles
        page.screenshot(path=str(OUT))
        browser.close()


if __name__ == "__main__":
    main()
