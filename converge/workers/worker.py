"""Starting a worker: ``converge worker`` and :func:`run_worker`."""

from __future__ import annotations

import logging
import os
import socket
from typing import Any

from celery.signals import setup_logging

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
    own_logging: bool = False,
) -> None:
    """Consume ``queue`` with ``concurrency`` worker processes until stopped
    (SIGTERM: warm shutdown, tasks in flight finish; SIGKILL: their tasks are
    requeued). ``backend_url`` None: whole runs only (suggestor tasks need a
    result backend to answer). Suggestor references resolve from the current directory and
    ``sys.path``. ``own_logging``: Celery leaves this process's logging as it is
    (:func:`converge.logs.configure_logging`), its own loggers at ``loglevel``.
    Raises ``ValueError`` for ``concurrency < 1``."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    if own_logging:  # a receiver of setup_logging: Celery configures nothing
        setup_logging.connect(_keep_logging, weak=False)
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


def _keep_logging(loglevel: int | str | None = None, **_: Any) -> None:
    """Celery's ``setup_logging`` (in the worker and each pool process): the handlers
    stay converge's; Celery's loggers log at the worker's ``--loglevel``."""
    logging.getLogger("celery").setLevel(loglevel or logging.WARNING)
