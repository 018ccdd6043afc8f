"""Where run messages go without a broker: :class:`LocalRunPool` (a
:class:`converge.run_queue.RunQueue`).

``converge.workers.CeleryRunQueue`` sends them to Celery workers; without a
broker, :class:`LocalRunPool` executes them in a bounded pool of threads of this
process (what ``converge serve`` uses, so that an approval never runs the job in
its HTTP request).
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor

from audit.store import SqlRunStore
from converge.run_queue import Action, RunQueue
from converge.service.execution import execute_run
from engine import ConvergeError, RunResult

__all__ = ["LocalRunPool", "RunQueue"]

log = logging.getLogger("converge.service")


class LocalRunPool:
    """Runs messages in ``max_workers`` threads of this process, over ``store``.

    A failure is logged, never raised to the sender (the run itself stops with a
    typed reason in the store). ``wait()`` blocks until every message sent so far
    is done (tests, shutdown); ``close()`` waits and stops the threads.
    """

    def __init__(self, store: SqlRunStore, max_workers: int = 2) -> None:
        self.store = store
        self._pool = ThreadPoolExecutor(max_workers, thread_name_prefix="converge-run")
        self._futures: set[Future[RunResult | None]] = set()
        self._lock = threading.Lock()

    def send(self, run_id: str, action: Action = "run") -> None:
        """Execute ``action`` on ``run_id`` in the pool (returns at once)."""
        future = self._pool.submit(self._execute, run_id, action)
        with self._lock:
            self._futures.add(future)
        future.add_done_callback(self._forget)

    def _execute(self, run_id: str, action: Action) -> RunResult | None:
        try:
            return execute_run(self.store, run_id, action)
        except ConvergeError as exc:
            log.error("run %s (%s) failed to execute: %s", run_id, action, exc)
            return None

    def _forget(self, future: Future[RunResult | None]) -> None:
        with self._lock:
            self._futures.discard(future)

    def wait(self, timeout: float | None = None) -> None:
        """Block until the messages sent so far are done (``timeout`` in seconds)."""
        with self._lock:
            pending = list(self._futures)
        for f in pending:
            f.result(timeout)

    def close(self) -> None:
        """Wait for the runs in the pool, then stop its threads."""
        self._pool.shutdown(wait=True)
