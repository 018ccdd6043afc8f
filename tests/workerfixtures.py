"""Suggestors the worker tests ship to real Celery workers (importable as
``tests.workerfixtures:NAME`` from the repository root, where the workers run)."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest

from engine import Context, Effect, Proposal, StopRun, Usage, suggestor

STAGES = 5
PER_STAGE = 10


def _stage_suggestor(stage: int, j: int) -> Any:
    reads = "seed" if stage == 0 else f"stage{stage}"

    @suggestor(name=f"s{stage}_{j}", dependencies=[reads])
    def propose(ctx: Context) -> list[Proposal]:
        facts = ctx.get(reads)
        total = sum(len(str(f.content)) for f in facts)
        if stage == STAGES - 1:
            return [Proposal("result", {"stage": stage, "j": j, "seen": len(facts)})]
        return [
            Proposal(
                f"stage{stage + 1}",
                {"from": j, "seen": len(facts), "size": total % 97},
                confidence=0.5 + j / 40,
                parents=tuple(f.id for f in facts[:2]),
            )
        ]

    return propose


SYNTHETIC = [_stage_suggestor(stage, j) for stage in range(STAGES) for j in range(PER_STAGE)]
"""50 suggestors in 5 stages of 10: stage k reads ``stage{k}`` and writes ``stage{k+1}``."""


@suggestor(name="seed_from_input", dependencies=["input"])
def seed_from_input(ctx: Context) -> Effect:
    """Turns each input into a seed; reports a little usage."""
    props = [Proposal("seed", {"n": f.content}, parents=(f.id,)) for f in ctx.get("input")]
    return Effect(props, Usage(3, 4, 0.001))


@suggestor(name="first", dependencies=["input"])
def first(ctx: Context) -> list[Proposal]:
    """Cycle 1: one ``step`` fact per input."""
    return [Proposal("step", f.content) for f in ctx.get("input")]


@suggestor(name="explode", dependencies=["step"])
def explode(ctx: Context) -> list[Proposal]:
    """Cycle 2: raises, as a buggy suggestor would."""
    raise ValueError(f"cannot handle {len(ctx.get('step'))} steps")


@suggestor(name="costly", dependencies=["step"])
def costly(ctx: Context) -> list[Proposal]:
    """Cycle 2: pays for a model call, records it, then raises."""
    ctx.record_usage("costly", Usage(120, 30, 0.5))
    raise ValueError("the answer could not be parsed")


@suggestor(name="stopper", dependencies=["step"])
def stopper(ctx: Context) -> list[Proposal]:
    """Cycle 2: stops the run on purpose."""
    raise StopRun("enough", context={"steps": len(ctx.get("step"))})


@suggestor(name="second", dependencies=["step"])
def second(ctx: Context) -> list[Proposal]:
    """Cycle 2: one ``done`` fact per step."""
    return [Proposal("done", f.content) for f in ctx.get("step")]


@suggestor(name="hang", dependencies=["step"])
def hang(ctx: Context) -> list[Proposal]:
    """Cycle 2: blocks far longer than any test's time budget (cut by a revoke)."""
    _handshake(ctx)
    time.sleep(120)
    return []


def _handshake(ctx: Context) -> None:
    """Tell the test this execution started (its pid on a Redis list named by the
    ``handshake`` input fact), then wait for its go (``None`` = do not wait)."""
    import redis

    for fact in ctx.get("handshake"):
        h = fact.content
        client = redis.Redis.from_url(h["redis"], socket_timeout=60)
        client.rpush(h["started"], os.getpid())
        if h.get("go"):
            client.blpop([h["go"]], timeout=30)
        client.close()


@suggestor(name="slow", dependencies=["step"])
def slow(ctx: Context) -> list[Proposal]:
    """Cycle 2: signals its start, waits for the test's go, then proposes."""
    _handshake(ctx)
    return [Proposal("slow", {"steps": len(ctx.get("step"))})]


# -- real workers for the tests -------------------------------------------------------
BROKER = os.environ.get("CONVERGE_TEST_BROKER") or "amqp://guest:guest@127.0.0.1:5672//"
BACKEND = os.environ.get("CONVERGE_TEST_REDIS") or "redis://127.0.0.1:6379/0"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def services_unreachable() -> str | None:
    """None when RabbitMQ and Redis answer, else why not (one line)."""
    import redis
    from kombu import Connection

    try:
        with Connection(BROKER, connect_timeout=3) as conn:
            conn.ensure_connection(max_retries=1)
        client = redis.Redis.from_url(BACKEND, socket_connect_timeout=3)
        client.ping()
        client.close()
    except Exception as exc:
        return f"broker or backend unreachable: {type(exc).__name__}: {exc}"
    return None


class Workers:
    """``count`` worker processes (``converge worker``, ``concurrency`` each) on their
    own queue, started from the repository root; :meth:`stop` ends them and deletes
    the queue."""

    def __init__(self, count: int, concurrency: int = 1, db: str | None = None) -> None:
        import uuid

        self.queue = f"converge-test-{uuid.uuid4().hex[:10]}"
        self.names = [f"{self.queue}-{i}@localhost" for i in range(count)]
        self.procs: list[Any] = []
        self.concurrency = concurrency
        self.db = db  # the store whole runs are executed over (--db)
        self.executors: list[Any] = []  # closed at stop(): their Redis keys deleted

    def start(self) -> Workers:
        for i in range(len(self.names)):
            self.procs.append(self._spawn(self.names[i]))
        self.wait_ready()
        return self

    def _spawn(self, name: str) -> Any:
        import subprocess
        import sys

        cmd = [sys.executable, "-m", "converge.cli", "worker", "--broker", BROKER]
        cmd += ["--backend", BACKEND, "--queue", self.queue, "--hostname", name]
        cmd += ["--concurrency", str(self.concurrency)]
        if self.db is not None:
            cmd += ["--db", self.db]
        return subprocess.Popen(
            cmd,
            cwd=REPO,
            start_new_session=True,  # its own process group: killed as one
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def kill_node_running(self, pid: int) -> int:
        """``kill -9`` the worker whose pool process is ``pid`` (the whole node, its
        pool included); its index."""
        import signal

        group = os.getpgid(pid)
        index = next(i for i, p in enumerate(self.procs) if p.pid == group)
        os.killpg(group, signal.SIGKILL)
        self.procs[index].wait(timeout=10)
        return index

    def respawn(self, index: int, wait: bool = True) -> None:
        """Start worker ``index`` again (under a new node name); with ``wait``, return
        once it answers."""
        self.names[index] = f"{self.queue}-{index}-{self.procs[index].pid}@localhost"
        self.procs[index] = self._spawn(self.names[index])
        if wait:
            self.wait_ready()

    def wait_ready(self, tries: int = 60) -> None:
        """Return once every worker answers a ping (each ping waits up to 0.5 s)."""
        if not pinged(self.names, timeout=tries * 0.5):
            raise RuntimeError(f"workers {self.names} did not start")

    def executor(self, **kwargs: Any) -> Any:
        """A :class:`CeleryExecutor` sending to these workers' queue."""
        from converge.workers import CeleryExecutor

        executor = CeleryExecutor(kwargs.pop("broker", BROKER), BACKEND, queue=self.queue, **kwargs)
        self.executors.append(executor)
        return executor

    def stop(self) -> None:
        import signal
        import subprocess

        from kombu import Connection

        for executor in self.executors:
            executor.close()
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)
            with contextlib.suppress(ProcessLookupError):  # pool processes left behind
                os.killpg(p.pid, signal.SIGKILL)
        with Connection(BROKER, connect_timeout=3) as conn:
            channel = conn.default_channel
            channel.queue_delete(self.queue)
            channel.exchange_delete(self.queue)


@suggestor(name="slow_twin", dependencies=["step"])
def slow_twin(ctx: Context) -> list[Proposal]:
    """Like :func:`slow`, so that two tasks of one cycle need two free workers."""
    _handshake(ctx)
    return [Proposal("slow_twin", {"steps": len(ctx.get("step"))})]


def started_workers(count: int = 2, **options: Any) -> Iterator[Workers]:
    """Workers for a module's tests (``options``: :class:`Workers`'s): RabbitMQ and
    Redis required under CI (else a skip naming what is unreachable); stopped afterwards."""
    reason = services_unreachable()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    pool = Workers(count, **options)
    try:  # stopped even when they fail to start: nothing is left running
        yield pool.start()
    finally:
        pool.stop()


def handshake_lists() -> Iterator[dict[str, Any]]:
    """For a fixture: the Redis lists a test and :func:`_handshake`'s suggestors talk
    through, ``{"redis": URL, "started": NAME, "go": NAME, "client": redis.Redis}``
    (``started``: the pids of the executions that began; ``go``: the test's go);
    both lists deleted afterwards."""
    import uuid

    import redis

    prefix = f"converge-test-{uuid.uuid4().hex[:10]}"
    client = redis.Redis.from_url(BACKEND, socket_timeout=60)
    h: dict[str, Any] = {"redis": BACKEND, "started": f"{prefix}:started", "go": f"{prefix}:go"}
    h["client"] = client
    try:
        yield h
    finally:
        client.delete(h["started"], h["go"])
        client.close()


def pinged(nodes: list[str], timeout: float) -> bool:
    """Whether every Celery node of ``nodes`` answered a ping (through the real broker)
    within ``timeout`` seconds (each ping waits up to 0.5 s)."""
    from kombu.exceptions import OperationalError

    from converge.workers import celery_app

    app = celery_app(BROKER, BACKEND)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            try:
                replies = app.control.ping(destination=nodes, timeout=0.5)
            except (OSError, OperationalError):
                # the broker reset this connection (the whole suite shares it, and a
                # connection idle past its heartbeat under load is closed): a new one
                app.close()
                app = celery_app(BROKER, BACKEND)
                continue
            if {name for r in replies for name in r} >= set(nodes):
                return True
        return False
    finally:
        app.close()
