"""W5: suggestors on Celery workers (docs/performance.md and docs/scale-out.md).

64 suggestors each doing 50 ms of blocking work per cycle (``time.sleep``: I/O
shaped, as a model call or a tool would be), 5 cycles, on one ``converge worker``
node with 1, 2 and 4 pool processes: wall time beside the ideal (320 x 50 ms / N)
and the speed-up over 1 process. Then the cost of the Celery path itself: 64
empty suggestors x 5 cycles on 4 processes against the same run in-process, per
task, for the context shipped through the Redis backend (``ship="backend"``, the
default) and inside every task (``ship="context"``). Needs RabbitMQ and Redis
(``$CONVERGE_TEST_BROKER``, ``$CONVERGE_TEST_REDIS``; the machine's by default);
skipped with a note when they do not answer.

``python -m benchmarks --only w5``
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

from benchmarks.harness import Row, Series, Stat, measure
from benchmarks.session import Suite
from engine import Budget, Context, Engine, Proposal, RunResult, suggestor

W5_SUGGESTORS = 64
W5_BLOCK_S = 0.050  # seconds of blocking work per execution
W5_CYCLES = 5
W5_PROCESSES = (1, 2, 4)
W5_TARGETS = {2: 1.8, 4: 3.2}  # speed-up over 1 process (docs/performance.md)
SHIP_COMPARED = ("backend", "context")  # how tasks get the context (CeleryExecutor ship=)
BROKER = os.environ.get("CONVERGE_TEST_BROKER") or "amqp://guest:guest@127.0.0.1:5672//"
BACKEND = os.environ.get("CONVERGE_TEST_REDIS") or "redis://127.0.0.1:6379/0"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _blocking(i: int) -> Any:
    @suggestor(name=f"blocking{i}")
    def work(ctx: Context) -> list[Proposal]:
        time.sleep(W5_BLOCK_S)
        return [Proposal(f"b{i}", ctx.cycle)]

    return work


def _empty(i: int) -> Any:
    @suggestor(name=f"empty{i}")
    def work(ctx: Context) -> list[Proposal]:
        return [Proposal(f"e{i}", ctx.cycle)]

    return work


BLOCKING = [_blocking(i) for i in range(W5_SUGGESTORS)]
"""Dependency-free, so each runs every cycle; each cycle adds a fact per suggestor."""
EMPTY = [_empty(i) for i in range(W5_SUGGESTORS)]


def build_run(suggestors: list[Any], executor: Any) -> Callable[[], Callable[[], RunResult]]:
    """A prepare: a fresh engine over ``suggestors`` for ``W5_CYCLES`` cycles."""

    def prepare() -> Callable[[], RunResult]:
        engine = Engine(budget=Budget(max_cycles=W5_CYCLES), executor=executor)
        engine.register(*suggestors)
        return engine.run

    return prepare


class Node:
    """One ``converge worker`` node with ``processes`` pool processes, on its own queue."""

    def __init__(self, processes: int) -> None:
        self.queue = f"converge-bench-{uuid.uuid4().hex[:10]}"
        self.name = f"{self.queue}@localhost"
        cmd = [sys.executable, "-m", "converge.cli", "worker", "--broker", BROKER]
        cmd += ["--backend", BACKEND, "--queue", self.queue, "--hostname", self.name]
        cmd += ["--concurrency", str(processes)]
        self.proc = subprocess.Popen(
            cmd,
            cwd=REPO,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        from converge.workers import CeleryExecutor

        self.executor = CeleryExecutor(BROKER, BACKEND, queue=self.queue)
        for _ in range(60):
            if self.executor.app.control.ping(destination=[self.name], timeout=0.5):
                break
        else:
            self.stop()
            raise RuntimeError("the benchmark's worker did not start")

    def executor_shipping(self, ship: str) -> Any:
        """Another executor on this node's queue, shipping the context as ``ship``."""
        from converge.workers import CeleryExecutor

        return CeleryExecutor(BROKER, BACKEND, queue=self.queue, ship=ship)  # type: ignore[arg-type]

    def stop(self) -> None:
        from kombu import Connection

        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=30)
        self.executor.close()
        with Connection(BROKER, connect_timeout=3) as conn:
            conn.default_channel.queue_delete(self.queue)
            conn.default_channel.exchange_delete(self.queue)


def unreachable() -> str | None:
    """None when the broker and the backend answer, else why not."""
    try:
        import redis
        from kombu import Connection

        with Connection(BROKER, connect_timeout=3) as conn:
            conn.ensure_connection(max_retries=1)
        redis.Redis.from_url(BACKEND, socket_connect_timeout=3).ping()
    except Exception as exc:
        return f"skipped: broker or backend unreachable ({type(exc).__name__})"
    return None


def run_w5(suite: Suite) -> None:
    """The W5 rows: wall time on 1, 2, 4 processes; per-task overhead of the Celery path."""
    tasks = W5_SUGGESTORS * W5_CYCLES
    size = f"{W5_SUGGESTORS}x{W5_BLOCK_S * 1000:.0f} ms x{W5_CYCLES}"
    skip = unreachable()
    if skip is not None:
        suite.rows.append(Row("W5 Celery workers", size, "s", False, None, note=skip))
        return
    runs = min(suite.sizes.runs, 3)  # 16 s a run on 1 process
    walls: dict[int, float] = {}
    overheads: dict[str, Series] = {}
    for n in W5_PROCESSES:
        node = Node(n)
        try:
            build_run(EMPTY, node.executor)()()  # every pool process imports the suggestors
            series = measure(build_run(BLOCKING, node.executor), runs=runs, warmup=0, max_series=1)
            if n == max(W5_PROCESSES):
                for ship in SHIP_COMPARED:
                    executor = node.executor_shipping(ship)
                    try:
                        overheads[ship] = measure(build_run(EMPTY, executor), runs=suite.sizes.runs)
                    finally:
                        executor.close()
        finally:
            node.stop()
        walls[n] = series.median
        ideal = tasks * W5_BLOCK_S / n
        speedup = walls[min(W5_PROCESSES)] / series.median
        target = W5_TARGETS.get(n)
        note = f"speed-up {speedup:.2f}x over 1 process"
        if target is not None:
            note += f" (target >= {target}x: {'met' if speedup >= target else 'NOT met'})"
        row = Row(
            "W5 Celery, blocking suggestors",
            f"{size}, {n} process{'es' if n > 1 else ''}",
            "s wall",
            False,
            Stat.of(series, lambda t: t),
            limit=Stat(ideal, ideal, ideal),
            limit_name=f"ideal {tasks} x 50 ms / {n}",
            note=note,
        )
        suite.add(row, series)
    local = measure(build_run(EMPTY, None), runs=suite.sizes.runs)
    in_process = local.median / tasks * 1000
    for ship, overhead in overheads.items():
        per_task = Stat.of(overhead, lambda t: t / tasks * 1000)
        row = Row(
            f"W5 per-task cost, empty suggestors, ship={ship}",
            f"{W5_SUGGESTORS}x{W5_CYCLES}, {max(W5_PROCESSES)} processes",
            "ms/task",
            False,
            per_task,
            limit=Stat(in_process, in_process, in_process),
            limit_name="the same run in-process",
            note=f"the Celery path adds {per_task.median - in_process:.2f} ms a task "
            f"({overhead.median * 1000 / W5_CYCLES:.0f} ms a cycle of {W5_SUGGESTORS} tasks)",
        )
        suite.add(row, overhead)
