"""A real Prometheus scrapes ``converge serve`` and a ``converge worker`` while runs
go and gates wait (issue 57, part A, item 4; docs/operations.md).

The test writes a scrape configuration (serve's ``/metrics`` with an admin's token
file, the worker's operator port), loads docs/operations/converge-rules.yml,
starts ``/usr/bin/prometheus`` on 127.0.0.1 with its own storage, waits for its
``/-/ready``, then causes runs that stop by budget and by success (on the server's
pool and on the worker) and gates that wait about three seconds, and asks
Prometheus' HTTP API for the rate of stopped runs by category and the p95 of the
gates' waits: it finds the numbers it caused. The rules load healthy and the
"no worker alive" alert's expression turns true once the worker is stopped.
"""

from __future__ import annotations

import signal
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from audit import open_store
from audit.people import add_token
from converge.jobs import load_job
from converge.service import submit_run
from converge.workers import CeleryRunQueue
from engine.status import RunStatus
from tests.faultfixtures import gated_job, ticking_job
from tests.metricsfixtures import (
    RULES,
    Target,
    by_label,
    health_worker,
    prometheus_server,
    promtool,
    query,
    queue_jobs,
)
from tests.realserve import decided_over_http, free_port, served_cli, stop_within
from tests.servicefixtures import until
from tests.workerfixtures import BROKER, services_unreachable

P95 = "histogram_quantile(0.95, sum by (le) (rate(converge_gate_wait_seconds_bucket[5m])))"
"""The p95 of the gates' waits over the last five minutes."""
GATE_WAIT_S = 3.0
"""Each gate is decided once it has waited this long: its wait falls in (2.5, 5] s."""


def _rules() -> dict[str, str]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return {r.get("alert") or r["record"]: r["expr"] for g in groups for r in g["rules"]}


def test_the_rules_file_passes_promtool() -> None:
    checked = promtool("check", "rules", str(RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert {"ConvergeGateOverdue", "ConvergeRunsCrashedByLease", "ConvergeNoWorkerAlive"} <= set(
        _rules()
    )


def test_prometheus_finds_the_stops_by_category_and_the_p95_of_gate_waits_it_was_shown(
    tmp_path: Path,
) -> None:
    if (reason := services_unreachable()) is not None:
        pytest.fail(reason)
    url = f"sqlite:///{tmp_path / 'scraped.db'}"
    store = open_store(url)
    admin, approver = add_token(store, "ada", "admin"), add_token(store, "abe", "approver")
    store.close()
    token_file = tmp_path / "scrape.token"
    token_file.write_text(admin)
    ticking = ticking_job(tmp_path / "ticking.yaml", max_cycles=3)
    gated = gated_job(tmp_path / "gated.yaml", steps=2)
    queue, worker_port = f"converge-prom-{uuid.uuid4().hex[:10]}", free_port()
    auth = {"Authorization": f"Bearer {approver}"}
    with (
        served_cli(url, tmp_path / "serve.log", "--pool", "2") as served,
        health_worker(url, queue, tmp_path / "worker.log", worker_port) as worker,
    ):
        targets = [
            Target("converge-serve", served.base.removeprefix("http://"), token_file),
            Target("converge-workers", f"127.0.0.1:{worker_port}"),
        ]
        with prometheus_server(tmp_path, targets) as prom:
            until(
                lambda: len(query(prom, "up == 1")) == 2,
                timeout=60,
                what=lambda: f"both targets up: {query(prom, 'up')}",
            )
            ids = queue_jobs(url, ticking, 3) + queue_jobs(url, gated, 2)
            held, runs = open_store(url), CeleryRunQueue(BROKER, queue)
            try:
                job = load_job(ticking)
                ids += [submit_run(job, held, runs) for _ in range(2)]
            finally:
                runs.close()
                held.close()
            _decide_after_waiting(served.base, auth)
            store = open_store(url)
            try:
                until(
                    lambda: all(store.run(r).status == RunStatus.STOPPED for r in ids),
                    timeout=90,
                    what=lambda: served.output()[-2000:],
                )
                caused = Counter(store.run(r).category for r in ids)
                waits = [g.decided_at - g.opened_at for g in store.gates() if g.decided_at]
            finally:
                store.close()

            def counted() -> dict[str, float] | None:
                got = by_label(
                    query(prom, "sum by (category) (converge_runs_stopped_total) > 0"), "category"
                )
                return got if got == {c: float(n) for c, n in caused.items()} else None

            until(counted, timeout=30, what="Prometheus scraped every stop")
            rates = by_label(
                query(prom, "sum by (category) (rate(converge_runs_stopped_total[5m]))"),
                "category",
            )
            increases = by_label(
                query(prom, "sum by (category) (increase(converge_runs_stopped_total[5m]))"),
                "category",
            )
            [p95] = query(prom, P95)
            rules = httpx.get(f"{prom}/api/v1/rules", timeout=10).json()["data"]["groups"]
            no_worker = _rules()["ConvergeNoWorkerAlive"]
            assert query(prom, no_worker) == []  # a worker answers
            stop_within(worker, signal.SIGTERM, tmp_path / "worker.log")
            until(
                lambda: query(prom, no_worker), timeout=30, what="the no-worker alert's expression"
            )

    print(f"caused {dict(caused)}; rate {rates}; increase {increases}; waits {waits}; p95 {p95}")
    assert caused == {"budget": 5, "success": 2}, caused
    for category, n in caused.items():
        assert rates[category] > 0, rates
        assert round(increases[category]) == n, increases
    assert set(rates) >= set(caused)
    assert all(v == 0 for c, v in rates.items() if c not in caused), rates
    assert len(waits) == 2 and all(2.5 < w <= 5.0 for w in waits), waits
    assert 2.5 < float(p95["value"][1]) <= 5.0, p95
    loaded = [r for g in rules if g["name"] == "converge" for r in g["rules"]]
    assert len(loaded) == len(_rules()) and all(r["health"] == "ok" for r in loaded), loaded


def _decide_after_waiting(base: str, auth: dict[str, str]) -> None:
    """Approve each of the two gates once it has waited :data:`GATE_WAIT_S` seconds (its
    age polled on the API, with a deadline)."""

    def pending() -> list[dict[str, Any]] | None:
        gates = httpx.get(f"{base}/api/gates?status=pending", headers=auth, timeout=10).json()
        return gates if len(gates) == 2 else None

    for gate in until(pending, timeout=60, what="two gates pending"):

        def aged(gate_id: str = gate["gate_id"]) -> bool:
            got = httpx.get(f"{base}/api/gates/{gate_id}", headers=auth, timeout=10).json()
            return bool(got["age_s"] >= GATE_WAIT_S)

        until(aged, timeout=30, what="the gate's wait")
        decided_over_http(
            base, gate["gate_id"], auth, {"approved": True, "value": "MIT"}, timeout=10
        )
