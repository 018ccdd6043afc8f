"""Runs as a service, on the store's side: queued runs, their taking,
cancel requests, the lease length of the runs this process holds (``_queue``;
docs/service.md, docs/scale-out.md); the decided runs whose resume is due and the
jobs of the runs waiting (``_waiting``); a worker's store made ready before its
first run (``_warming``).
"""

from __future__ import annotations

from audit.run_queue._queue import (
    cancel_requested,
    clear_cancel,
    queue_run,
    request_cancel,
    requeue_stopped,
    runs_to_recover,
    take_queued,
)
from audit.run_queue._waiting import resumes_to_recover, waiting_jobs
from audit.run_queue._warming import warm_store
from audit.writing import DEFAULT_LEASE_S, LEASE_ENV, lease_seconds

__all__ = [
    "DEFAULT_LEASE_S",
    "LEASE_ENV",
    "cancel_requested",
    "clear_cancel",
    "lease_seconds",
    "queue_run",
    "request_cancel",
    "requeue_stopped",
    "resumes_to_recover",
    "runs_to_recover",
    "take_queued",
    "waiting_jobs",
    "warm_store",
]
