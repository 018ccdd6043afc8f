"""Runs as a service: submit a run to a queue, execute and resume runs on workers,
decide gates without running anything in the request, cancel and recover runs.

With a broker (``converge worker``, :class:`converge.workers.CeleryRunQueue`) runs
go through Celery; without one, :class:`LocalRunPool` runs them in a bounded pool
of the serving process (``converge serve``). The store is the source of truth: a
run is recorded ``queued`` before any message about it is sent, and whoever
executes it takes it with a compare-and-set (``audit.run_queue._queue``), so a message
delivered twice never runs a run twice; :class:`BackgroundQueue` sends the
messages of a server's answers off their path. See docs/service.md.
"""

from converge.service.deadlines import DeadlineKeeper
from converge.service.execution import execute_run, watching_cancel
from converge.service.handing import BackgroundQueue
from converge.service.queues import POOL_DONE, LocalRunPool, RunQueue
from converge.service.submission import ExpiredLeases, recover_runs, submit_run
from converge.service.warming import preload_jobs

__all__ = [
    "POOL_DONE",
    "BackgroundQueue",
    "DeadlineKeeper",
    "ExpiredLeases",
    "LocalRunPool",
    "RunQueue",
    "execute_run",
    "preload_jobs",
    "recover_runs",
    "submit_run",
    "watching_cancel",
]
