"""``converge worker``: a Celery worker running suggestors for remote runs."""

from __future__ import annotations

from typing import Annotated

import typer

from converge.cli.commands import CommandGroup
from converge.cli.render import fail

app = CommandGroup()


@app.command()
def worker(
    broker: Annotated[
        str, typer.Option("--broker", help="Broker URL, e.g. amqp://guest:guest@host:5672//.")
    ],
    backend: Annotated[
        str, typer.Option("--backend", help="Result backend URL, e.g. redis://host:6379/0.")
    ],
    queue: Annotated[str, typer.Option("--queue", help="The queue to consume.")] = "converge",
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, help="Worker processes.")] = 1,
    hostname: Annotated[
        str | None, typer.Option("--hostname", help="Celery node name (default from the pid).")
    ] = None,
    loglevel: Annotated[str, typer.Option("--loglevel", help="Celery log level.")] = "WARNING",
) -> None:
    """Run suggestors sent by `Engine(executor=CeleryExecutor(...))` until stopped.

    Start it where the suggestors' modules import (the job's directory, or with
    them on PYTHONPATH). Needs the 'workers' extra.
    """
    try:
        from converge.workers import run_worker
    except ImportError as exc:
        fail(str(exc))
    run_worker(
        broker, backend, queue=queue, concurrency=concurrency, hostname=hostname, loglevel=loglevel
    )
