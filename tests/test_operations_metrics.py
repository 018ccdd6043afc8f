"""Prometheus metrics of converge (issue 57, part A, item 3; docs/operations.md).

The real ``converge serve`` counts what the worker processes of its pool did (runs
started and stopped by kind and category, cycles, facts, gates opened and their
waits, decisions, suggestor executions, store writes), equal to what its store
recorded; its text passes ``promtool check metrics`` and carries no run id, gate
id or person as a label. Tokens by model and direction, the queue's depth and
lease takeovers are counted in process.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, text, update

from audit import SqlRunStore, open_store
from audit.people import add_token
from audit.run_queue import queue_run
from audit.tables import run_leases, runs
from converge import metrics
from converge.access import MetricsAccess
from converge.service import ExpiredLeases
from converge.web import create_app
from engine import Context, Effect, Engine, Proposal, RunHeader, Usage, suggestor
from engine.status import RunStatus
from engine.store import AuditEvent
from tests.faultfixtures import expire_gate, gated_job, make_stores, paused_run, ticking_job
from tests.metricsfixtures import (
    ALLOWED_LABELS,
    events_of_kind,
    label_names,
    promtool,
    queue_jobs,
    scrape,
    total,
    value,
)
from tests.realserve import decided_over_http, served_cli
from tests.servicefixtures import until

TICKING, GATED = 3, 2
"""Runs stopped by their cycle budget, and runs that wait at a gate, then finish."""
WAIT_S = 1.0
"""How long the test lets each gate wait at least before deciding it (seconds)."""


def _mine(store: SqlRunStore, ids: list[str]) -> list[Any]:
    return [store.run(r) for r in ids]


def test_serve_counts_what_its_pool_processes_did(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'served.db'}"
    store = open_store(url)
    admin, approver = add_token(store, "ada", "admin"), add_token(store, "abe", "approver")
    store.close()
    ids = queue_jobs(url, ticking_job(tmp_path / "ticking.yaml", max_cycles=3), TICKING)
    ids += queue_jobs(url, gated_job(tmp_path / "gated.yaml", steps=2), GATED)
    auth = {"Authorization": f"Bearer {approver}"}
    with served_cli(url, tmp_path / "serve.log", "--pool", "2") as served:

        def pending() -> list[dict[str, Any]] | None:
            gates = httpx.get(f"{served.base}/api/gates?status=pending", headers=auth).json()
            return gates if len(gates) == GATED else None

        gates = until(pending, timeout=60, what=lambda: served.output()[-2000:])
        time.sleep(WAIT_S)  # the gates' wait, which the histogram must show
        for gate in gates:
            decided_over_http(
                served.base, gate["gate_id"], auth, {"approved": True, "value": "MIT"}, timeout=10
            )  # the resume sent to the pool

        def finished() -> bool:
            s = open_store(url)
            try:
                return all(r.status == RunStatus.STOPPED for r in _mine(s, ids))
            finally:
                s.close()

        until(finished, timeout=60, what=lambda: served.output()[-2000:])
        text_ = scrape(served.base, admin)

    store = open_store(url)
    try:
        rows = _mine(store, ids)
        promoted = sum(1 for r in ids for f in store.facts(r) if f.provenance.suggestor != "input")
        waits = [g.decided_at - g.opened_at for g in store.gates() if g.decided_at]
    finally:
        store.close()
    stops = Counter((r.kind, r.category) for r in rows)
    assert value(text_, "converge_runs_started_total") == len(ids)
    for (kind, category), n in stops.items():
        assert value(text_, "converge_runs_stopped_total", kind=kind, category=category) == n
    assert total(text_, "converge_runs_stopped_total") == len(ids)
    assert value(text_, "converge_gates_opened_total") == GATED
    assert value(text_, "converge_gate_wait_seconds_count") == GATED
    assert value(text_, "converge_gate_wait_seconds_sum") == pytest.approx(sum(waits), abs=0.01)
    assert min(waits) >= WAIT_S
    assert value(text_, "converge_decision_seconds_count") == GATED
    assert value(text_, "converge_cycles_total") == events_of_kind(url, "cycle_started")
    assert value(text_, "converge_facts_promoted_total") == promoted
    executed = events_of_kind(url, "suggestor_executed")
    assert total(text_, "converge_suggestor_seconds_count") == executed
    assert value(text_, "converge_suggestor_seconds_count", suggestor="tick") > 0
    assert value(text_, "converge_store_commit_seconds_count") > 0
    assert value(text_, "converge_queue_depth") == 0
    assert label_names(text_) <= ALLOWED_LABELS
    for run_id in ids:
        assert run_id not in text_
    checked = promtool("check", "metrics", stdin=text_)
    assert checked.returncode == 0 and checked.stdout + checked.stderr == "", checked


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlRunStore]:
    made = open_store(str(tmp_path / "metered.db"))
    yield made
    made.close()


def _read(name: str, **labels: str) -> float:
    return metrics.FAMILIES.get_sample_value(name, labels) or 0.0


class _Model:
    model_name = "local-gemma"


class _Agent:
    model = _Model()


class _Priced:
    """A suggestor with a model that reports tokens (as an agent suggestor does)."""

    name = "reviewer"
    dependencies = frozenset({"seed"})
    agent = _Agent()

    def accepts(self, ctx: Context) -> bool:
        return True

    def execute(self, ctx: Context) -> Effect:
        return Effect([Proposal("review", {"ok": True})], Usage(120, 30, 0.0))


@suggestor(name="counter", dependencies=["seed"])
def counter(ctx: Context) -> Effect:
    return Effect([Proposal("count", 1)], Usage(5, 0, 0.0))


def test_tokens_are_counted_by_model_and_direction_and_suggestors_timed(
    store: SqlRunStore,
) -> None:
    before = {
        "in": _read("converge_model_tokens_total", model="local-gemma", direction="input"),
        "out": _read("converge_model_tokens_total", model="local-gemma", direction="output"),
        "none": _read("converge_model_tokens_total", model="none", direction="input"),
        "timed": _read("converge_suggestor_seconds_count", suggestor="reviewer"),
        "started": _read("converge_runs_started_total"),
    }
    engine = Engine(store=store).register(_Priced(), counter)
    metrics.instrument(engine)

    result = engine.run({"seed": [1]})

    assert result.stop_reason.kind == "converged"
    assert _read("converge_model_tokens_total", model="local-gemma", direction="input") - before[
        "in"
    ] == (120)
    assert (
        _read("converge_model_tokens_total", model="local-gemma", direction="output")
        - before["out"]
        == 30
    )
    assert _read("converge_model_tokens_total", model="none", direction="input") - before[
        "none"
    ] == (5)
    assert _read("converge_suggestor_seconds_count", suggestor="reviewer") - before["timed"] == 1
    assert _read("converge_runs_started_total") - before["started"] == 1


def test_metering_a_store_twice_counts_its_events_once(store: SqlRunStore) -> None:
    metrics.meter_store(store)
    metrics.meter_store(store)
    before = _read("converge_cycles_total")
    store.start_run(RunHeader("m1", None, None, ("a",), time.time()), [])
    store.append_events("m1", [AuditEvent("cycle_started", 1, {}, time.time())])
    assert _read("converge_cycles_total") - before == 1


def test_the_queue_depth_is_read_from_the_store_at_each_scrape(store: SqlRunStore) -> None:
    client = TestClient(create_app(store, metrics_access=MetricsAccess.PUBLIC))
    assert value(client.get("/metrics").text, "converge_queue_depth") == 0
    for i in range(3):
        queue_run(store, RunHeader(f"q{i}", None, None, (), time.time()))
    assert value(client.get("/metrics").text, "converge_queue_depth") == 3


class _Queue:
    def __init__(self) -> None:
        self.sent: list[str] = []

    def send(self, run_id: str, action: str = "run") -> None:
        self.sent.append(run_id)


def test_a_run_sent_again_for_its_expired_lease_is_one_takeover(store: SqlRunStore) -> None:
    store.start_run(RunHeader("r1", None, None, ("a",), time.time()), [])
    store.leases.drop("r1")
    with store.transaction() as conn:
        conn.execute(
            update(run_leases).where(run_leases.c.run_id == "r1").values(holder="host-b/42/7")
        )
        conn.execute(
            text("UPDATE run_leases SET expires_at = unixepoch() - 10 WHERE run_id = 'r1'")
        )
    now = [100.0]
    queue = _Queue()
    sweep = ExpiredLeases(store, queue, resend_s=60.0, clock=lambda: now[0])  # type: ignore[arg-type]
    before = _read("converge_lease_takeovers_total")

    sweep.tick()
    sweep.tick()  # within the resend delay: nothing sent, nothing counted
    now[0] += 61.0
    sweep.tick()  # sent again: the same takeover, not another

    assert queue.sent == ["r1", "r1"]
    assert _read("converge_lease_takeovers_total") - before == 1
    with store.transaction(write=False) as conn:
        assert conn.execute(select(runs.c.status).where(runs.c.run_id == "r1")).scalar() in (
            "running",
            "crashed",
        )


def test_gates_pending_and_overdue_are_read_from_the_store_at_each_scrape(
    tmp_path: Path,
) -> None:
    with make_stores("sqlite", tmp_path) as stores:
        paused = paused_run(stores, tmp_path, timeout_s=3600)
        store = open_store(paused.url)
        try:
            client = TestClient(create_app(store, metrics_access=MetricsAccess.PUBLIC))
            before = client.get("/metrics").text
            expire_gate(paused.url, paused.gate_id)  # its deadline a minute ago
            after = client.get("/metrics").text
        finally:
            store.close()
    assert value(before, "converge_gates_pending") == 1
    assert value(before, "converge_gates_overdue") == 0
    assert value(after, "converge_gates_pending") == 1
    assert value(after, "converge_gates_overdue") == 1
