"""A decision's answer waits for neither the broker nor the worker (issue 46, S1).

The server hands a decided run's resume to a :class:`BackgroundQueue`: ``send``
returns at once and a thread of its own publishes. The decision and the gate's
decided state are in the store before the answer; a resume whose message never
left (the broker down, then the server gone) is found again from the store
(``recover_runs``) and the run is resumed exactly once, however many messages
about it arrive. A worker readies its store and imports its jobs before its
first message (``warm_store``, ``preload_jobs``).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from audit.run_queue import queue_run, resumes_to_recover, warm_store
from converge.decisions import decide
from converge.jobs import load_job
from converge.run_queue import Action
from converge.service import BackgroundQueue, execute_run, preload_jobs, recover_runs
from engine import ConvergeError, GateDecision, RunHeader
from engine.status import GateStatus, RunStatus
from tests.faultfixtures import Stores, make_stores, opened, paused_run

WAIT_S = 10.0


@pytest.fixture(params=["sqlite", "postgresql"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stores]:
    """Stores of one kind for this test, removed afterwards."""
    with make_stores(request.param, tmp_path) as made:
        yield made


class Blocked:
    """A queue whose ``send`` waits until the test releases it (a broker that hangs,
    a worker that has not started); what it sent, in order."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.sent: list[tuple[str, Action]] = []

    def send(self, run_id: str, action: Action = "run") -> None:
        self.entered.set()
        assert self.release.wait(WAIT_S)
        self.sent.append((run_id, action))


class Refusing:
    """A queue whose broker is down for its first ``failures`` sends (forever: None)."""

    def __init__(self, failures: int | None = None) -> None:
        self.failures = failures
        self.tries = 0
        self.sent: list[tuple[str, Action]] = []

    def send(self, run_id: str, action: Action = "run") -> None:
        self.tries += 1
        if self.failures is None or self.tries <= self.failures:
            raise ConvergeError(f"cannot send run {run_id}: broker unreachable")
        self.sent.append((run_id, action))


def test_the_answer_returns_while_the_publish_is_blocked_then_the_run_resumes(
    stores: Stores, tmp_path: Path
) -> None:
    paused = paused_run(stores, tmp_path, steps=2)
    inner = Blocked()
    queue = BackgroundQueue(inner)
    try:
        with opened(paused.url) as store:
            report = decide(
                store, paused.gate_id, GateDecision(approved=True, by="ann"), queue=queue
            )
            # answered while the hand-over is still blocked: nothing sent yet
            assert inner.entered.wait(WAIT_S)
            assert inner.sent == [] and queue.pending == 1
            assert report.result is None and report.gate.status == GateStatus.APPROVED
            # recorded before the answer: the gate decided, the run not resumed yet
            assert store.get_gate(paused.gate_id).status == GateStatus.APPROVED
            assert store.run(paused.run_id).status == RunStatus.PAUSED
            inner.release.set()
            assert queue.flush(WAIT_S)
            assert inner.sent == [(paused.run_id, "resume")]
            result = execute_run(store, paused.run_id, "resume")  # the worker, now
            assert result is not None and store.run(paused.run_id).status == RunStatus.STOPPED
            assert resumes_to_recover(store) == []
    finally:
        inner.release.set()
        queue.close(1.0)


def test_a_resume_not_published_before_the_server_stopped_is_recovered_once(
    stores: Stores, tmp_path: Path
) -> None:
    paused = paused_run(stores, tmp_path, steps=2)
    down = Refusing()  # the broker is down at answer time, and stays down
    queue = BackgroundQueue(down, retry_s=(0.001, 0.005))
    with opened(paused.url) as store:
        decide(store, paused.gate_id, GateDecision(approved=True, by="ann"), queue=queue)
        assert store.get_gate(paused.gate_id).status == GateStatus.APPROVED
        while down.tries < 3:  # tried, and tried again
            time.sleep(0.001)
        assert queue.close(0.05) == [(paused.run_id, "resume")]  # the server stops
        with pytest.raises(ConvergeError, match="closed"):
            queue.send(paused.run_id, "resume")
        assert down.sent == []
        # a worker starting later finds the resume in the store
        assert resumes_to_recover(store) == [paused.run_id]
        noted = Refusing(failures=0)
        assert recover_runs(store, noted) == [paused.run_id]
        assert noted.sent == [(paused.run_id, "resume")]
        # the recovered message and a late duplicate: one resume
        first = execute_run(store, paused.run_id, "resume")
        written = store.run(paused.run_id).last_seq
        second = execute_run(store, paused.run_id, "resume")
        assert first is not None and second is None
        assert store.run(paused.run_id).last_seq == written  # the duplicate wrote nothing
        assert store.run(paused.run_id).status == RunStatus.STOPPED
        assert resumes_to_recover(store) == []


def test_refused_messages_are_sent_again_in_order_each_once() -> None:
    flaky = Refusing(failures=3)
    queue = BackgroundQueue(flaky, retry_s=(0.001, 0.004))
    try:
        queue.send("r1", "resume")
        queue.send("r2", "run")
        assert queue.flush(WAIT_S)
        assert flaky.sent == [("r1", "resume"), ("r2", "run")]
        assert flaky.tries == 5  # 3 refused, then each once
    finally:
        assert queue.close(1.0) == []


def test_a_pending_gate_is_no_resume_to_recover(stores: Stores, tmp_path: Path) -> None:
    paused = paused_run(stores, tmp_path, steps=2)
    with opened(paused.url) as store:
        assert resumes_to_recover(store) == []  # waiting for a person, not for a worker


def test_a_worker_store_is_ready_before_its_first_run(stores: Stores) -> None:
    with opened(stores.fresh()) as store:
        assert not store.has_table("run_cancels")
        warm_store(store)
        assert store.has_table("run_cancels")
        if store.is_postgres:  # two backends opened, each having planned every table
            assert store.sql_engine.pool.checkedin() >= 2  # type: ignore[attr-defined]


def test_a_worker_imports_the_jobs_of_queued_runs_before_any_message(
    stores: Stores, tmp_path: Path
) -> None:
    module = f"s1_preloaded_{time.monotonic_ns()}"
    (tmp_path / f"{module}.py").write_text(
        "from engine import suggestor\n\n"
        "@suggestor(name='noop', dependencies=[])\n"
        "def noop(ctx):\n    return []\n"
    )
    job_file = tmp_path / "preloaded.yaml"
    job_file.write_text(f'{{"name": "preloaded", "suggestors": ["{module}:noop"]}}')
    job = load_job(job_file)
    try:
        with opened(stores.fresh()) as store:
            queue_run(store, RunHeader("run-preloaded", job.name, job.record(), (), time.time()))
            assert module not in sys.modules
            assert preload_jobs(store) == ["preloaded"]
            assert module in sys.modules
    finally:
        sys.modules.pop(module, None)


def test_connecting_to_an_unreachable_broker_is_a_converge_error() -> None:
    from converge.workers import CeleryRunQueue

    queue = CeleryRunQueue("amqp://guest:guest@127.0.0.1:1//", "converge-test-unreachable")
    try:
        with pytest.raises(ConvergeError, match="cannot reach the broker"):
            queue.connect()
    finally:
        queue.close()
