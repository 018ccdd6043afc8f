"""Scale-out under faults (DESIGN.md §13): killed workers, failing suggestors, a lost
broker, hung tasks, cancels. Real ``converge worker`` processes on the machine's
RabbitMQ and Redis, on a queue of their own; without them the tests skip, unless
``$CI`` is set: then they fail.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from audit import open_store
from converge.workers import CeleryExecutor
from engine import (
    Budget,
    Engine,
    Error,
    ErrorCategory,
    RunResult,
    TimeBudgetExhausted,
    UserCancelled,
)
from tests import workerfixtures as wf


@pytest.fixture(scope="module")
def workers() -> Iterator[wf.Workers]:
    yield from wf.started_workers(2)


@pytest.fixture
def handshake() -> Iterator[dict[str, Any]]:
    """Redis lists a test and its suggestors talk through: ``started`` (pids) and ``go``."""
    yield from wf.handshake_lists()


def _initial(h: dict[str, Any], go: bool = True) -> dict[str, list[Any]]:
    content = {"redis": h["redis"], "started": h["started"], "go": h["go"] if go else None}
    return {"input": ["a", "b"], "handshake": [content]}


def _started_pid(h: dict[str, Any], timeout: int = 30) -> int:
    got = h["client"].blpop([h["started"]], timeout=timeout)
    assert got is not None, "the worker task did not start"
    return int(got[1])


def _facts(result: RunResult) -> list[tuple[Any, ...]]:
    return [(f.id, f.key, f.content, f.confidence, f.provenance) for f in result.context]


def _in_background(fn: Any) -> threading.Thread:
    t = threading.Thread(target=fn, daemon=True)
    t.start()
    return t


# -- a killed worker -----------------------------------------------------------------
SUGGESTORS = (wf.first, wf.slow, wf.second)


def _undisturbed(h: dict[str, Any]) -> RunResult:
    def release_once() -> None:
        _started_pid(h)
        h["client"].rpush(h["go"], 1)

    _in_background(release_once)
    result = Engine().register(*SUGGESTORS).run(_initial(h))
    assert result.stop_reason.kind == "converged"
    return result


def _run_killing(
    workers: wf.Workers, h: dict[str, Any], store: Any, run_id: str, kill: Any
) -> tuple[RunResult, list[int]]:
    """Run while ``kill(pid)`` kills whatever runs the ``slow`` task once it started;
    the task must start again elsewhere. The pids that started it, in order."""
    pids: list[int] = []

    def kill_then_release() -> None:
        pids.append(_started_pid(h))
        kill(pids[0])
        pids.append(_started_pid(h))  # the task was requeued and runs again
        h["client"].rpush(h["go"], 1)

    t = _in_background(kill_then_release)
    engine = Engine(store=store, executor=workers.executor()).register(*SUGGESTORS)
    result = engine.run(_initial(h), run_id=run_id)
    t.join(timeout=30)
    return result, pids


def _assert_undisturbed(result: RunResult, undisturbed: RunResult, store: Any) -> None:
    assert _facts(result) == _facts(undisturbed)
    assert result.stop_reason == undisturbed.stop_reason
    promoted = store.events(result.run_id, kinds=["fact_promoted"])
    assert len(promoted) == len(result.context) - 3  # no fact promoted twice
    assert len({f.id for f in result.context}) == len(result.context)
    assert store.verify(result.run_id).ok


@pytest.fixture
def three_workers(workers: wf.Workers) -> Iterator[wf.Workers]:
    """Three workers of their own (after the services were found reachable)."""
    pool = wf.Workers(3).start()
    try:
        yield pool
    finally:
        pool.stop()


def test_kill_9_of_a_worker_mid_task_ends_every_trial_with_the_undisturbed_facts(
    three_workers: wf.Workers, handshake: dict[str, Any], tmp_path: Path
) -> None:
    undisturbed = _undisturbed(handshake)
    store = open_store(str(tmp_path / "audit.db"))
    pool = three_workers
    for trial in range(10):

        def kill_node(pid: int) -> None:
            # the replacement starts while the other workers go on
            pool.respawn(pool.kill_node_running(pid), wait=False)

        result, pids = _run_killing(pool, handshake, store, f"trial-{trial}", kill_node)
        assert len(pids) == 2 and pids[0] != pids[1], f"trial {trial}: {result.stop_reason}"
        _assert_undisturbed(result, undisturbed, store)


def test_kill_9_of_the_pool_process_running_a_task_requeues_it(
    workers: wf.Workers, handshake: dict[str, Any], tmp_path: Path
) -> None:
    undisturbed = _undisturbed(handshake)
    store = open_store(str(tmp_path / "audit.db"))

    def kill_pool_process(pid: int) -> None:
        os.kill(pid, signal.SIGKILL)  # the worker node notices, rejects, the broker requeues

    result, pids = _run_killing(workers, handshake, store, "pool", kill_pool_process)
    assert len(pids) == 2 and pids[0] != pids[1], str(result.stop_reason)
    _assert_undisturbed(result, undisturbed, store)


# -- a failing suggestor -----------------------------------------------------------------
def test_a_suggestor_raising_on_a_worker_stops_the_run_as_in_process_with_the_earlier_facts(
    workers: wf.Workers, tmp_path: Path
) -> None:
    def run(executor: CeleryExecutor | None, db: str) -> tuple[RunResult, Any]:
        store = open_store(str(tmp_path / db))
        engine = Engine(store=store, executor=executor).register(wf.first, wf.explode, wf.second)
        return engine.run({"input": ["a", "b"]}, run_id="raising"), store

    local, _ = run(None, "local.db")
    remote, store = run(workers.executor(), "remote.db")
    assert isinstance(remote.stop_reason, Error)
    assert remote.stop_reason.error_category == ErrorCategory.SUGGESTOR
    assert remote.stop_reason == local.stop_reason
    assert remote.stop_reason.message == "explode: ValueError: cannot handle 2 steps"
    assert _facts(remote) == _facts(local)
    assert [f.key for f in remote.context] == ["input", "input", "step", "step"]
    kinds = [e.kind for e in store.events(remote.run_id)]
    assert "suggestor_failed" in kinds and kinds[-1] == "run_stopped"
    assert store.verify(remote.run_id).ok


def test_a_raising_suggestor_stops_the_cycle_without_waiting_for_a_later_hung_one(
    workers: wf.Workers, handshake: dict[str, Any]
) -> None:
    engine = Engine(executor=workers.executor()).register(wf.first, wf.explode, wf.hang)
    result = engine.run(_initial(handshake, go=False))  # no time budget: hang never ends
    assert isinstance(result.stop_reason, Error)
    assert result.stop_reason.message == "explode: ValueError: cannot handle 2 steps"
    _both_workers_free(workers, handshake)  # the hung task was revoked


def test_a_suggestor_raising_on_a_worker_under_on_error_continue_is_counted_as_in_process(
    workers: wf.Workers, tmp_path: Path
) -> None:
    def run(executor: CeleryExecutor | None, db: str) -> tuple[RunResult, Any]:
        store = open_store(str(tmp_path / db))
        engine = Engine(store=store, executor=executor, on_error="continue")
        engine.register(wf.first, wf.explode, wf.second)
        return engine.run({"input": ["a", "b"]}, run_id="continuing"), store

    (local, local_store), (remote, store) = run(None, "l.db"), run(workers.executor(), "r.db")
    assert remote.stop_reason == local.stop_reason
    assert _facts(remote) == _facts(local)
    assert "done" in {f.key for f in remote.context}  # the run went on past the failure
    failed = store.events(remote.run_id, kinds=["suggestor_failed"])
    # a traceback names the frames of the process that raised: compared apart
    assert [{k: v for k, v in e.payload.items() if k != "traceback"} for e in failed] == [
        {k: v for k, v in e.payload.items() if k != "traceback"}
        for e in local_store.events(local.run_id, kinds=["suggestor_failed"])
    ]
    assert failed[0].payload["error"] == "ValueError: cannot handle 2 steps"
    # the worker's own traceback, down to the suggestor's line
    assert 'raise ValueError(f"cannot handle' in failed[0].payload["traceback"]


# -- the broker ------------------------------------------------------------------------
def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stopped_external(engine: Engine, after: Callable[[], None]) -> tuple[RunResult, Error]:
    """``engine``'s run of two inputs (``after()`` called once it ends, however), which
    must stop on an external error: the result and that error."""
    try:
        result = engine.run({"input": ["a", "b"]})
    finally:
        after()
    assert isinstance(result.stop_reason, Error)
    assert result.stop_reason.error_category == ErrorCategory.EXTERNAL
    return result, result.stop_reason


def test_an_unreachable_broker_stops_the_run_external_with_the_input_kept(
    tmp_path: Path,
) -> None:
    url = f"amqp://guest:secret-pw@127.0.0.1:{_closed_port()}//"
    store = open_store(str(tmp_path / "audit.db"))
    executor = CeleryExecutor(url, wf.BACKEND, queue=f"converge-test-{uuid.uuid4().hex[:10]}")
    engine = Engine(store=store, executor=executor).register(wf.first, wf.second)
    result, error = _stopped_external(engine, executor.close)
    assert "unreachable" in error.message
    assert "secret-pw" not in error.message  # no credentials in the trail
    assert [f.key for f in result.context] == ["input", "input"]
    assert store.verify(result.run_id).ok
    assert store.run(result.run_id).kind == "error"


class Proxy:
    """A TCP proxy on 127.0.0.1 in front of ``target``; :meth:`stop` drops every
    connection and stops listening, as a broker going down would."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.server.getsockname()[1])
        self.sockets: list[socket.socket] = []
        self.lock = threading.Lock()
        _in_background(self._accept)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            with self.lock:
                self.sockets += [client, upstream]
            _in_background(lambda a=client, b=upstream: self._pipe(a, b))
            _in_background(lambda a=client, b=upstream: self._pipe(b, a))

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass

    def stop(self) -> None:
        with contextlib.suppress(OSError):  # wakes the accept() blocked on it
            self.server.shutdown(socket.SHUT_RDWR)
        self.server.close()
        with self.lock:
            for s in self.sockets:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()


def test_a_broker_lost_mid_run_stops_external_with_the_facts_so_far_and_a_chain_that_verifies(
    workers: wf.Workers, tmp_path: Path
) -> None:
    proxy = Proxy(("127.0.0.1", 5672))
    via_proxy = wf.BROKER.replace("127.0.0.1:5672", f"127.0.0.1:{proxy.port}")
    assert via_proxy != wf.BROKER
    store = open_store(str(tmp_path / "audit.db"))

    stopped: list[int] = []

    def broker_down_after_cycle_1(cycle: int, percent: float) -> None:
        if cycle == 1:
            proxy.stop()
            stopped.append(cycle)

    engine = Engine(
        store=store, executor=workers.executor(broker=via_proxy), progress=broker_down_after_cycle_1
    ).register(wf.first, wf.second)
    result, _ = _stopped_external(engine, proxy.stop)
    local = (
        Engine(budget=Budget(max_cycles=1)).register(wf.first, wf.second).run({"input": ["a", "b"]})
    )
    assert _facts(result) == _facts(local)  # cycle 1's facts, nothing lost
    assert store.verify(result.run_id).ok
    assert store.run(result.run_id).facts_count == len(result.context)


# -- time budget and cancel ------------------------------------------------------------
def test_the_time_budget_cuts_a_hung_worker_task_within_a_second_of_the_deadline(
    workers: wf.Workers, handshake: dict[str, Any]
) -> None:
    engine = Engine(budget=Budget(max_seconds=2), executor=workers.executor())
    engine.register(wf.first, wf.hang)
    began = time.monotonic()
    result = engine.run(_initial(handshake, go=False))
    took = time.monotonic() - began
    assert isinstance(result.stop_reason, TimeBudgetExhausted)
    assert took < 2 + 1, f"the run ended {took:.2f} s after it began"
    assert [f.key for f in result.context].count("step") == 2  # cycle 1 kept
    _both_workers_free(workers, handshake)


def test_cancel_revokes_the_tasks_in_flight_and_frees_the_workers(
    workers: wf.Workers, handshake: dict[str, Any]
) -> None:
    engine = Engine(executor=workers.executor()).register(wf.first, wf.hang)

    def cancel_once_started() -> None:
        _started_pid(handshake)
        engine.cancel()

    t = _in_background(cancel_once_started)
    result = engine.run(_initial(handshake, go=False))
    t.join(timeout=30)
    assert isinstance(result.stop_reason, UserCancelled)
    assert [f.key for f in result.context].count("step") == 2
    _both_workers_free(workers, handshake)


def _both_workers_free(workers: wf.Workers, h: dict[str, Any]) -> None:
    """Both workers start a task: none is still stuck in a revoked one."""
    from tests.workerfixtures import slow, slow_twin

    h["client"].delete(h["started"], h["go"])
    engine = Engine(executor=workers.executor()).register(wf.first, slow, slow_twin)
    pids: list[int] = []

    def release_when_both_started() -> None:
        pids.append(_started_pid(h, timeout=20))
        pids.append(_started_pid(h, timeout=20))
        h["client"].rpush(h["go"], 1, 1)

    t = _in_background(release_when_both_started)
    result = engine.run(_initial(h))
    t.join(timeout=30)
    assert len(pids) == 2 and result.stop_reason.kind == "converged"
