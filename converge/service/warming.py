"""A worker made ready before its first message: :func:`preload_jobs`.

``converge worker`` imports the modules of the jobs its store's queued and paused
runs recorded before it starts its pool's processes, which inherit them: the
first resume of each process then imports nothing (with approvals answered beside
workers, the job's
modules were most of a cold resume, ten processes at once on the two cores the
server answered from). Each process then opens its store and readies it
(:func:`audit.run_queue.warm_store`, from ``converge.workers.runs.warm_up``).
"""

from __future__ import annotations

import logging

from audit.run_queue import waiting_jobs
from audit.store import SqlRunStore
from converge.jobs import job_from_record
from engine import ConvergeError

log = logging.getLogger("converge.service")

PRELOADED_JOBS = 20
"""At most this many distinct jobs are imported at a worker's start."""


def preload_jobs(store: SqlRunStore, limit: int = PRELOADED_JOBS) -> list[str]:
    """Import the modules of the suggestors, criteria and invariants of the distinct
    jobs that ``store``'s queued and paused runs recorded (the most recent
    ``limit``); the names of the jobs imported. A job whose references no longer
    import is logged and left to its run (which stops with the error). Raises
    ``StoreError``."""
    names: list[str] = []
    for record in waiting_jobs(store, limit):
        try:
            job = job_from_record(record)
            job.check_references()
        except ConvergeError as exc:
            log.warning("job not preloaded: %s", exc)
            continue
        names.append(job.name)
    return names
