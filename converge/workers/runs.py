"""Whole runs on Celery workers: the body of the ``converge.run`` task.

A message is ``(run_id, action)``; the worker executes it over its own store
(``--db``, or ``$CONVERGE_DB``) with :func:`converge.service.execute_run`. The task
is acknowledged late and rejected when its worker process is lost, so a worker
killed with -9 mid-run puts the message back and another worker recovers the
run from its last checkpoint; the store's take and claim (compare-and-sets) make
a redelivered or duplicated message a no-op while the run is held or finished.

SIGTERM (to the worker or to its pool processes) cancels the runs in flight at
their next cycle boundary (:class:`converge.interrupts.Shutdown`); each one's resume
is sent back to the queue, so another worker finishes it. A cycle that does not
end within the grace period dies with its process: its message is put back, and
the run, ``crashed``, is recovered by whoever takes it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from typing import Any

from audit.run_queue import warm_store
from audit.store import SqlRunStore, open_store
from converge.interrupts import Shutdown
from converge.run_queue import Action
from converge.service import execute_run
from converge.workers.app import DEFAULT_QUEUE
from engine import ConvergeError

log = logging.getLogger("converge.worker")

RUN_TASK = "converge.run"

_store: tuple[int, SqlRunStore] | None = None
_shutdown = Shutdown(exit_when_idle=True)
"""This worker process's stop (its SIGTERM handler is set by :func:`warm_up`)."""
_requeue: tuple[Any, str] | None = None
"""The Celery app and queue a run cancelled by a stop is sent back to."""


def _worker_store() -> SqlRunStore:
    """This worker process's store (opened once per process: a forked child opens its own)."""
    global _store
    if _store is None or _store[0] != os.getpid():
        _store = (os.getpid(), open_store(os.environ.get("CONVERGE_DB")))
    return _store[1]


def run_message(run_id: str, action: Action = "run") -> dict[str, Any]:
    """Execute a run message in this worker; ``{"run_id", "stop"}`` (``stop`` is the
    stop kind, or None when there was nothing to do here). A run that cannot be
    executed (unknown, its job no longer imports) is logged and acknowledged. A run
    cancelled by this worker's stop is sent back to the queue as a ``resume``."""
    _catch_sigterm()
    with _shutdown.executing():  # sending back included: a stop waits for it
        if _shutdown.requested.is_set():  # stopping: the message goes to another worker
            _send_back(run_id, action)
            return {"run_id": run_id, "stop": None}
        try:
            result = execute_run(_worker_store(), run_id, action, prepare=_shutdown.track)
        except ConvergeError as exc:
            log.error("run %s (%s) cannot be executed here: %s", run_id, action, exc)
            return {"run_id": run_id, "stop": None, "error": str(exc)}
        stop = None if result is None else result.stop_reason.kind_code()
        if stop == "user_cancelled" and _shutdown.requested.is_set():
            _send_back(run_id, "resume")
    return {"run_id": run_id, "stop": stop}


def _send_back(run_id: str, action: Action) -> None:
    """Put ``(run_id, action)`` back on this worker's queue (its runs stopped with it)."""
    if _requeue is None:
        log.error("run %s: stopped with this worker, and no queue to send it back to", run_id)
        return
    app, queue = _requeue
    app.send_task(RUN_TASK, args=[run_id, action], queue=queue)
    log.warning("run %s: stopped with this worker, sent back to %s (%s)", run_id, queue, action)


def _catch_sigterm() -> None:
    """SIGTERM stops this pool process as :class:`converge.interrupts.Shutdown` says
    (billiard's handler, set after ``worker_process_init``, would exit mid-run)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _shutdown.on_signal)


def warm_up(**_: Any) -> None:
    """Open this worker process's store as it starts (Celery's ``worker_process_init``)
    and ready it (:func:`audit.run_queue.warm_store`), so that its first run does not
    pay for the connections, the schema and table checks and the
    imports (a burst of CPU that, on a host shared with ``converge serve``, delays
    the server's answers). A store that cannot be opened yet is opened, and its
    error reported, by the first run."""
    try:
        warm_store(_worker_store())
    except ConvergeError as exc:
        log.warning("worker store not opened at start: %s", exc)


def register_run_task(app: Any, queue: str = DEFAULT_QUEUE) -> None:
    """Register ``converge.run`` on a worker's Celery ``app`` consuming ``queue``:
    acknowledged late, rejected (put back) when the worker process running it is
    lost, no result; each worker process opens its store as it starts
    (:func:`warm_up`), and the worker's warm shutdown stops its runs in flight
    (:func:`stop_pool`)."""
    from celery.signals import worker_process_init, worker_shutting_down

    global _requeue
    _requeue = (app, queue)
    app.task(name=RUN_TASK, acks_late=True, reject_on_worker_lost=True, ignore_result=True)(
        run_message
    )
    worker_process_init.connect(warm_up, weak=False)
    worker_shutting_down.connect(stop_pool, weak=False)


def stop_pool(**_: Any) -> None:
    """In the worker's main process as its shutdown starts (Celery's
    ``worker_shutting_down``): SIGTERM to its pool processes, whose runs in flight
    stop at their next cycle boundary (Celery's warm shutdown would wait for them
    to end, which an unbounded run never does)."""
    from billiard.process import active_children

    for child in active_children():
        if child.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, signal.SIGTERM)
