"""Starting a worker: ``converge worker`` and :func:`run_worker`."""

from __future__ import annotations

import os
import socket

from converge.workers.app import DEFAULT_QUEUE, celery_app
from converge.workers.runs import register_run_task

__all__ = ["run_worker"]


def run_worker(
    broker_url: str,
    backend_url: str | None,
    *,
    queue: str = DEFAULT_QUEUE,
    concurrency: int = 1,
    hostname: str | None = None,
    loglevel: str = "WARNING",
) -> None:
    """Consume ``queue`` with ``concurrency`` worker processes until stopped
    (SIGTERM: warm shutdown, tasks in flight finish; SIGKILL: their tasks are
    requeued). ``backend_url`` None: whole runs only (suggestor tasks need a
    result backend to answer). Suggestor references resolve from the current directory and
    ``sys.path``. Raises ``ValueError`` for ``concurrency < 1``."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    app = celery_app(broker_url, backend_url)
    register_run_task(app, queue)
    name = hostname or f"converge-{os.getpid()}@{socket.gethostname()}"
    app.worker_main(
        [
            "worker",
            f"--queues={queue}",
            f"--concurrency={concurrency}",
            "--pool=prefork",
            f"--hostname={name}",
            f"--loglevel={loglevel}",
            "--without-gossip",
            "--without-mingle",
        ]
    )
