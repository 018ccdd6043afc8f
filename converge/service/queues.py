"""Where run messages go without a broker: :class:`LocalRunPool` (a
:class:`converge.run_queue.RunQueue`).

``converge.workers.CeleryRunQueue`` sends them to Celery workers; without a
broker, :class:`LocalRunPool` executes each one in a worker process
(``python -m converge.cli worker --runs-from-stdin``), at most ``max_workers`` at
a time, the others queued: what ``converge serve`` uses, so that a run, bounded
or not, never runs in the server's process nor in an HTTP request. The processes
are started when first needed and reused: a resume does not wait for a new
process's imports (about 0.6 s of CPU each, beside the server's answers).
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import threading
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor

from sqlalchemy.engine import make_url

from audit.store import KEY_ENV, SqlRunStore
from converge.interrupts import GRACE_S
from converge.run_queue import Action, RunQueue
from converge.service.execution import execute_run
from converge.service.pool_lines import POOL_DONE, message_line, read_answer
from engine import ConvergeError, StoreError

__all__ = ["POOL_DONE", "LocalRunPool", "RunQueue", "reachable_by_processes"]

log = logging.getLogger("converge.service")

STOP_WAIT_S = GRACE_S + 1.0
"""How long (seconds) :meth:`LocalRunPool.close` waits for its workers after SIGTERM
before it kills them (they exit within their own grace period)."""


def reachable_by_processes(store: SqlRunStore) -> bool:
    """False for a store that only this process can open (in-memory SQLite)."""
    url = make_url(store.url)
    return not (url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:"))


class LocalRunPool:
    """Executes run messages over ``store`` in worker processes, ``max_workers`` at a
    time; messages beyond that wait in order.

    Each message goes to an idle ``python -m converge.cli worker --runs-from-stdin``
    process (a JSON line each way: :mod:`converge.service.pool_lines`) over the
    same store (its URL and key in the child's environment, not on its command
    line), started when none is idle and kept for the next messages; it stops when
    this process is gone. A failure is logged, never raised to the
    sender (the run itself stops with a typed reason in the store).
    ``in_process=True`` runs them in threads of this process instead (an in-memory
    store, which no other process can open). ``wait()`` blocks until every message
    sent so far is done (tests); ``close()`` stops the pool: the workers' runs are
    cancelled at their cycle boundary and put back in the queue (``queued``), the
    messages not started are dropped (logged; their runs stay queued, or paused
    with a decided gate, for :func:`converge.service.recover_runs` at the next
    start). Raises ``StoreError`` for an in-memory store without ``in_process``.
    """

    def __init__(self, store: SqlRunStore, max_workers: int = 2, *, in_process: bool = False):
        if not in_process and not reachable_by_processes(store):
            raise StoreError("an in-memory store cannot be reached by worker processes")
        self.store = store
        self.in_process = in_process
        self._pool = ThreadPoolExecutor(max_workers, thread_name_prefix="converge-run")
        self._futures: set[Future[int | None]] = set()
        self._pending: Counter[str] = Counter()  # run id → its messages not done
        self._children: set[subprocess.Popen[str]] = set()
        self._idle: list[subprocess.Popen[str]] = []
        self._lock = threading.Lock()
        self._closing = False

    def send(self, run_id: str, action: Action = "run") -> None:
        """Execute ``action`` on ``run_id`` in the pool (returns at once). Raises
        ``ConvergeError`` once the pool is closed (the run stays as recorded)."""
        with self._lock:
            if self._closing:
                raise ConvergeError(f"cannot send run {run_id}: the run pool is stopping")
            future = self._pool.submit(self._execute, run_id, action)
            self._futures.add(future)
            self._pending[run_id] += 1
        future.add_done_callback(lambda done: self._forget(done, run_id))

    @property
    def accepting(self) -> bool:
        """Whether :meth:`send` takes messages (the pool is not closing): readiness."""
        with self._lock:
            return not self._closing

    def pending(self) -> set[str]:
        """The runs whose messages this pool has not finished (waiting or executing)."""
        with self._lock:
            return set(self._pending)

    def _execute(self, run_id: str, action: Action) -> int | None:
        if self.in_process:
            try:
                execute_run(self.store, run_id, action)
            except ConvergeError as exc:
                log.error("run %s (%s) failed to execute: %s", run_id, action, exc)
            return None
        return self._in_child(run_id, action)

    def _in_child(self, run_id: str, action: Action) -> int | None:
        """Run the message in a worker process; its exit code (None: not started)."""
        child = self._take_child()
        if child is None:
            log.warning("run %s (%s): not started, the pool is stopping", run_id, action)
            return None
        assert child.stdin is not None and child.stdout is not None
        code: int | None = None
        try:
            child.stdin.write(message_line(action, run_id))
            child.stdin.flush()
            for line in child.stdout:
                answer = read_answer(line)
                if answer is not None and answer.run_id == run_id:
                    code = answer.code
                    break
                sys.stdout.write(line)  # the run's own output, as a worker's
        except (OSError, ValueError):  # the process died
            code = None
        with self._lock:
            if code is not None and not self._closing and child.poll() is None:
                self._idle.append(child)
                gone = False
            else:
                self._children.discard(child)
                gone = True
        if gone:  # reaped: its stdin closed, an idle process exits
            ended = _ended(child)
            code = ended if code is None else code
        if code in (2, 1) or (code is not None and code < 0):
            log.error("run %s (%s): its worker process ended it with %s", run_id, action, code)
        return code

    def _take_child(self) -> subprocess.Popen[str] | None:
        """An idle worker process, or a new one (None once the pool is closing)."""
        with self._lock:
            if self._closing:
                return None
            while self._idle:
                child = self._idle.pop()
                if child.poll() is None:
                    return child
                self._children.discard(child)
        # started outside the lock: a send() (an approval's answer) never waits for it
        cmd = [sys.executable, "-m", "converge.cli", "worker", "--runs-from-stdin"]
        cmd += ["--parent", str(os.getpid())]
        env = {**os.environ, "CONVERGE_DB": self.store.url}
        if self.store.key is not None:
            env[KEY_ENV] = self.store.key.decode()
        child = subprocess.Popen(
            cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
        )
        with self._lock:
            self._children.add(child)
            closing = self._closing
        if closing:  # close() began meanwhile: this one is not needed
            child.terminate()
            self._children.discard(child)
            return None
        return child

    def _forget(self, future: Future[int | None], run_id: str) -> None:
        with self._lock:
            self._futures.discard(future)
            self._pending[run_id] -= 1
            if self._pending[run_id] <= 0:
                del self._pending[run_id]

    def wait(self, timeout: float | None = None) -> None:
        """Block until the messages sent so far are done (``timeout`` in seconds)."""
        with self._lock:
            pending = list(self._futures)
        for f in pending:
            f.result(timeout)

    def close(self) -> None:
        """Stop: SIGTERM to the workers (killed after :data:`STOP_WAIT_S` seconds),
        the messages not started dropped; returns once the pool's threads ended.
        In-process runs are waited for."""
        with self._lock:
            self._closing = True
            children = list(self._children)
            self._idle.clear()
        for child in children:
            child.terminate()  # an idle one exits at once, a busy one at its cycle's end
        for child in children:
            try:
                child.wait(STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                child.kill()
        self._pool.shutdown(wait=True, cancel_futures=True)


def _ended(child: subprocess.Popen[str]) -> int:
    """The exit code of a worker process that stopped answering (its pipes closed)."""
    for pipe in (child.stdin, child.stdout):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()
    return child.wait()
