"""Work cut on Celery workers is never a fixed point (issue 28, DESIGN.md §13).

Every worker is killed while a cycle's task runs, so the task waits in the queue
until the time budget revokes it: the run stops ``TimeBudgetExhausted`` only (no
``converged`` in that cycle), its checkpoint names the cut suggestor, and once a
worker is back a resume runs that suggestor again in its first cycle and ends as
the undisturbed in-process run does. On SQLite and PostgreSQL; real
``converge worker`` processes on the machine's RabbitMQ and Redis (required
under ``$CI``, else skipped).
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from audit import open_store
from audit.testing import pg_schema
from converge.workers import CeleryExecutor
from engine import Budget, Engine, RunResult, TimeBudgetExhausted
from tests import workerfixtures as wf
from tests.pgfixtures import require_pg

SUGGESTORS = (wf.first, wf.slow)  # cycle 1: a step per input; cycle 2: slow, on "step"


@pytest.fixture
def lone_worker() -> Iterator[wf.Workers]:
    """One worker on a queue of its own: killing it leaves the queue with none."""
    yield from wf.started_workers(1)


@pytest.fixture
def handshake() -> Iterator[dict[str, Any]]:
    """Redis lists the test and ``slow`` talk through: ``started`` (pids) and ``go``."""
    yield from wf.handshake_lists()


@pytest.fixture(params=["sqlite", "postgresql"])
def open_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Any]]:
    """Opens the test's store (each call another handle, as another process would);
    on SQLite and on a PostgreSQL schema of its own (required under ``$CI``)."""
    opened: list[Any] = []

    def opener(url: str) -> Callable[[], Any]:
        def open_one() -> Any:
            opened.append(open_store(url))
            return opened[-1]

        return open_one

    try:
        if request.param == "sqlite":
            yield opener(str(tmp_path / "audit.db"))
        else:
            require_pg()
            with pg_schema("converge_cut") as url:
                try:
                    yield opener(url)
                finally:  # before the schema is dropped
                    while opened:
                        opened.pop().close()
    finally:
        while opened:
            opened.pop().close()


def _initial(h: dict[str, Any]) -> dict[str, list[Any]]:
    return {"input": ["a", "b"], "handshake": [{k: h[k] for k in ("redis", "started", "go")}]}


def _stops(store: Any, run_id: str) -> list[tuple[int, str]]:
    return [(e.cycle, e.payload["kind"]) for e in store.events(run_id, kinds=["stop_signal"])]


def _undisturbed(h: dict[str, Any]) -> RunResult:
    """The job in-process, ``slow`` let through at once."""
    h["client"].rpush(h["go"], 1)
    result = Engine().register(*SUGGESTORS).run(_initial(h))
    h["client"].delete(h["started"], h["go"])
    assert result.stop_reason.kind == "converged"
    return result


def test_a_task_cut_when_every_worker_is_killed_runs_again_on_resume_and_never_converges_falsely(
    lone_worker: wf.Workers, handshake: dict[str, Any], open_db: Callable[[], Any]
) -> None:
    h = handshake
    undisturbed = _undisturbed(h)
    killed: list[int] = []

    def kill_every_worker_once_slow_started() -> None:
        got = h["client"].blpop([h["started"]], timeout=30)
        if got is not None:
            killed.append(lone_worker.kill_node_running(int(got[1])))

    t = threading.Thread(target=kill_every_worker_once_slow_started, daemon=True)
    t.start()
    store = open_db()
    engine = Engine(budget=Budget(max_seconds=5), store=store, executor=lone_worker.executor())
    first = engine.register(*SUGGESTORS).run(_initial(h), run_id="cut-on-workers")
    t.join(timeout=30)
    assert killed == [0], "slow's task did not start on the worker"
    # the task went back to a queue no worker consumes: the deadline revoked it
    assert isinstance(first.stop_reason, TimeBudgetExhausted)
    assert first.signals == (first.stop_reason,) and first.cycles == 2
    assert _stops(store, "cut-on-workers") == [(2, "time_budget_exhausted")]
    assert store.load_checkpoint("cut-on-workers")["cut"] == ["slow"]

    lone_worker.respawn(0)  # a worker is back
    h["client"].rpush(h["go"], 1, 1)  # slow goes on at once (a stale task may take one)
    resumer = Engine(store=open_db(), executor=lone_worker.executor())
    again = resumer.register(*SUGGESTORS).resume_run("cut-on-workers", Budget(max_seconds=300))
    # slow ran in the first cycle after the resume, and the run ends as in-process
    assert [f.provenance[:2] for f in again.context.get("slow")] == [("slow", 3)]
    key = [(f.id, f.key, f.content) for f in again.context]
    assert key == [(f.id, f.key, f.content) for f in undisturbed.context]
    assert again.stop_reason == undisturbed.stop_reason
    cycles = store.events("cut-on-workers", kinds=["cycle_started"])
    assert [(e.cycle, e.payload["eligible"]) for e in cycles] == [
        (1, ["first"]),
        (2, ["slow"]),
        (3, ["slow"]),
    ]
    assert _stops(store, "cut-on-workers") == [(2, "time_budget_exhausted"), (3, "converged")]
    promoted = [e.payload["id"] for e in store.events("cut-on-workers", kinds=["fact_promoted"])]
    assert len(promoted) == len(set(promoted)) == len(again.context) - 3  # 3 inputs
    assert store.verify("cut-on-workers").ok


@pytest.fixture
def services() -> None:
    """RabbitMQ and Redis, required under ``$CI`` (else a skip naming what is missing)."""
    reason = wf.services_unreachable()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)


def test_a_task_revoked_on_its_worker_as_expired_is_cut_work_not_an_executor_failure(
    services: None, tmp_path: Path
) -> None:
    # no worker: the test takes the task off the queue and, as a worker whose clock
    # is ahead of the engine's would, finds it expired and marks it revoked
    executor = CeleryExecutor(wf.BROKER, wf.BACKEND, queue=f"converge-test-{uuid.uuid4().hex[:10]}")
    taken: list[str] = []

    def expire_the_first_task() -> None:
        queue = executor.app.amqp.queues[executor.queue]
        with executor.app.connection_for_read() as conn:

            def take(body: Any, message: Any) -> None:
                message.ack()
                taken.append(message.headers["id"])
                executor.app.backend.mark_as_revoked(taken[0], "expired")

            with conn.Consumer(queue, callbacks=[take], accept=["json"]):
                conn.drain_events(timeout=30)

    t = threading.Thread(target=expire_the_first_task, daemon=True)
    t.start()
    store = open_store(str(tmp_path / "audit.db"))
    engine = Engine(budget=Budget(max_seconds=120), store=store, executor=executor)
    try:
        result = engine.register(wf.first).run({"input": ["a"]}, run_id="expired")
    finally:
        t.join(timeout=30)
        with executor.app.connection_for_write() as conn:
            conn.default_channel.queue_delete(executor.queue)
            conn.default_channel.exchange_delete(executor.queue)
        executor.close()
    assert len(taken) == 1
    assert isinstance(result.stop_reason, TimeBudgetExhausted)  # not Error(external)
    assert result.signals == (result.stop_reason,) and result.cycles == 1
    assert store.load_checkpoint("expired")["cut"] == ["first"]
