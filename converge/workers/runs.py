"""Whole runs on Celery workers: the body of the ``converge.run`` task.

A message is ``(run_id, action)``; the worker executes it over its own store
(``--db``, or ``$CONVERGE_DB``) with :func:`converge.service.execute_run`. The task
is acknowledged late and rejected when its worker process is lost, so a worker
killed with -9 mid-run puts the message back and another worker recovers the
run from its last checkpoint; the store's take and claim (compare-and-sets) make
a redelivered or duplicated message a no-op while the run is held or finished.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from audit.store import SqlRunStore, open_store
from converge.run_queue import Action
from converge.service import execute_run
from engine import ConvergeError

log = logging.getLogger("converge.worker")

RUN_TASK = "converge.run"

_store: tuple[int, SqlRunStore] | None = None


def _worker_store() -> SqlRunStore:
    """This worker process's store (opened once per process: a forked child opens its own)."""
    global _store
    if _store is None or _store[0] != os.getpid():
        _store = (os.getpid(), open_store(os.environ.get("CONVERGE_DB")))
    return _store[1]


def run_message(run_id: str, action: Action = "run") -> dict[str, Any]:
    """Execute a run message in this worker; ``{"run_id", "stop"}`` (``stop`` is the
    stop kind, or None when there was nothing to do here). A run that cannot be
    executed (unknown, its job no longer imports) is logged and acknowledged."""
    try:
        result = execute_run(_worker_store(), run_id, action)
    except ConvergeError as exc:
        log.error("run %s (%s) cannot be executed here: %s", run_id, action, exc)
        return {"run_id": run_id, "stop": None, "error": str(exc)}
    return {"run_id": run_id, "stop": None if result is None else result.stop_reason.kind_code()}


def warm_up(**_: Any) -> None:
    """Open this worker process's store as it starts (Celery's ``worker_process_init``),
    so that its first run does not pay for the connection, the schema check and the
    imports (a burst of CPU that, on a host shared with ``converge serve``, delays
    the server's answers). A store that cannot be opened yet is opened, and its
    error reported, by the first run."""
    try:
        _worker_store()
    except ConvergeError as exc:
        log.warning("worker store not opened at start: %s", exc)


def register_run_task(app: Any) -> None:
    """Register ``converge.run`` on a worker's Celery ``app``: acknowledged late,
    rejected (put back) when the worker process running it is lost, no result; each
    worker process opens its store as it starts (:func:`warm_up`)."""
    from celery.signals import worker_process_init

    app.task(name=RUN_TASK, acks_late=True, reject_on_worker_lost=True, ignore_result=True)(
        run_message
    )
    worker_process_init.connect(warm_up, weak=False)
