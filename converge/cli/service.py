"""``converge submit``, ``cancel`` and ``watch``: runs as a service (docs/service.md).

``submit`` records a run ``queued`` and hands it to the workers of ``--broker``
(``$CONVERGE_BROKER``), printing its run id at once; without a broker, to a
``converge worker --run RUN`` process of its own in the background. ``cancel``
asks whichever process runs it to stop it; ``watch`` follows it to its stop.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated

import typer

from audit.queries import RunRow
from audit.store import SqlRunStore
from converge.cli.actors import NO_RUNNER_OPTIONS, ReaderTokenOption, RunnerFlags, asked, record
from converge.cli.commands import CommandGroup, option_groups
from converge.cli.pipes import stdout_closed
from converge.cli.reading import read_run
from converge.cli.render import (
    DbOption,
    JsonOption,
    err,
    fail,
    failing_on,
    open_sql_store,
    out,
    stderr_console,
)
from converge.run_queue import Action
from engine import ConvergeError
from engine.status import RunStatus

if TYPE_CHECKING:  # imported where used: `approve` needs none of the service
    from converge.service import RunQueue

app = CommandGroup()

BrokerOption = Annotated[
    str | None,
    typer.Option(
        "--broker",
        help="Celery broker URL (default $CONVERGE_BROKER); none: a background process here.",
    ),
]
QueueOption = Annotated[str, typer.Option("--queue", help="The queue of the workers that run it.")]
WATCH_POLL_S = 0.25
"""How often (seconds) ``converge watch`` reads the run."""


class DetachedProcess:
    """Without a broker: each message runs in a ``converge worker --run`` process
    started in the background (its own session: it outlives this command)."""

    def __init__(self, db: str | None) -> None:
        self.db = db

    def send(self, run_id: str, action: Action = "run") -> None:
        """Start ``converge worker --run RUN_ID [--resume]`` detached."""
        cmd = [sys.executable, "-m", "converge.cli", "worker", "--run", run_id]
        if action == "resume":
            cmd.append("--resume")
        if self.db:
            cmd += ["--db", self.db]
        subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )


def run_queue_for(broker: str | None, queue: str, db: str | None) -> RunQueue:
    """Where ``submit`` and ``approve --detach`` send runs: Celery on ``broker``
    (``$CONVERGE_BROKER``), else a detached process of this machine."""
    url = broker or os.environ.get("CONVERGE_BROKER")
    if not url:
        return DetachedProcess(db)
    try:
        from converge.workers import CeleryRunQueue
    except ImportError as exc:
        fail(f"{exc} (a broker needs the 'workers' extra)")
    return CeleryRunQueue(url, queue)


@app.command()
@option_groups()
def submit(
    job_file: Annotated[str, typer.Argument(help="The job file (YAML).")],
    db: DbOption = None,
    broker: BrokerOption = None,
    queue: QueueOption = "converge",
    as_json: JsonOption = False,
    acting: RunnerFlags = NO_RUNNER_OPTIONS,
) -> None:
    """Put a run of a job on a queue and print its run id at once.

    The run is recorded as queued before it is sent, so nothing submitted is lost
    (`converge worker --recover` sends again what no worker took). Follow it with
    `converge watch RUN`.
    """
    from converge.access import Action as Access
    from converge.access import job_view
    from converge.jobs import load_job
    from converge.service import submit_run

    with failing_on(ConvergeError):
        job = load_job(job_file)
    store = open_sql_store(db, must_exist=False)
    who = acting.principal(store)  # before the run is queued: four eyes relies on it
    asked(store, who, Access.START_RUN, job_view(job.spec.name, job.raw))
    with failing_on(ConvergeError):
        run_id = submit_run(job, store, run_queue_for(broker, queue, db))
    record(store, run_id, who.name, "submitted")
    if as_json:
        out.print_json(data={"run_id": run_id, "status": RunStatus.QUEUED})
    else:
        out.print(run_id, highlight=False)


@app.command()
@option_groups()
def cancel(
    run_id: Annotated[str, typer.Argument(help="The run to cancel (queued or running).")],
    db: DbOption = None,
    acting: RunnerFlags = NO_RUNNER_OPTIONS,
) -> None:
    """Stop a queued or running run, on whichever worker holds it.

    It ends UserCancelled at its next cycle boundary, its facts kept; `converge
    resume RUN` goes on from there. Who cancels is checked as for `converge run`
    (a known person; with tokens required, the token's own person) and recorded.
    """
    from audit.run_queue import request_cancel
    from converge.access import Action as Access
    from converge.access import run_view

    store = open_sql_store(db)
    with failing_on(ConvergeError):
        rid = store.resolve_run_id(run_id)
        who = acting.principal(store, doing="cancel a run")  # before the request is written
        asked(store, who, Access.CANCEL_RUN, lambda: run_view(store, rid))
        status = request_cancel(store, rid, who.name)
    out.print(f"cancel requested: run {rid} ({status}) stops at its next cycle boundary")


@app.command()
def watch(
    run_id: Annotated[str, typer.Argument(help="The run to follow.")],
    db: DbOption = None,
    timeout: Annotated[
        float | None, typer.Option("--timeout", min=0, help="Give up after this many seconds.")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Each event as one JSON line, nothing else.")
    ] = False,
    until_pause: Annotated[
        bool,
        typer.Option("--until-pause", help="Stop at a pause waiting on a person (exit 10)."),
    ] = False,
    token: ReaderTokenOption = None,
) -> None:
    """Follow a run to its stop, one line per event as it is committed, and exit
    with its exit code.

    Prints each cycle, each suggestor's usage, the facts promoted, the gates opened
    and decided; a paused run is followed through its decision and resume to its
    stop (--until-pause: exit 10 at the pause instead). --json prints the events
    as JSON lines. Exits 2 for an unknown run, and 124 when --timeout passes first.
    """
    from converge.access import Action as Access
    from converge.cli.watching import watch_events
    from engine.wording import counted

    store, rid, person = read_run(db, token, run_id, Access.FOLLOW_RUN)

    def write(line: str) -> None:
        out.print(line, highlight=False, markup=False, soft_wrap=True)
        if stdout_closed():  # nobody reads on: stop following (a paused run may wait days)
            raise BrokenPipeError("the reader of stdout closed the pipe")

    with failing_on(ConvergeError):
        row = watch_events(
            store,
            rid,
            write,
            as_json=as_json,
            until_pause=until_pause,
            timeout=timeout,
            person=person,
        )
    if row is None:
        fail(f"run {rid} has not stopped after {timeout} s", 124)
    reason = row.stop_reason
    if reason is None:
        fail(f"run {rid} ended {row.status} with no stop reason recorded")
    if not as_json:
        out.print(
            f"run {rid} {row.status}: {reason.kind_code()} ({reason.category.value}, "
            f"exit {reason.exit_code}) after {counted(row.cycles, 'cycle')}, "
            f"{counted(row.facts_count, 'fact')}",
            highlight=False,
        )
    raise typer.Exit(reason.exit_code)


def _waits(store: SqlRunStore, run_id: str) -> bool:
    """A paused run waits for a person while one of its gates is pending; once its
    gate is decided, its resume is on its way (``approve --detach``)."""
    return any(g.run_id == run_id for g in store.gates(pending=True))


def follow(
    store: SqlRunStore,
    run_id: str,
    *,
    timeout: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    wait: Callable[[float], None] = time.sleep,
) -> RunRow | None:
    """Read ``run_id`` every :data:`WATCH_POLL_S` until it stops or pauses (its row) or
    ``timeout`` seconds pass (None), with a progress line on a terminal."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from engine.wording import counted

    started = clock()
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TimeElapsedColumn(),
        console=stderr_console(),
        transient=True,
        disable=not err.is_terminal,
    ) as progress:
        task = progress.add_task(run_id, total=None)
        while True:
            row = store.run(run_id)
            progress.update(
                task,
                description=(
                    f"{run_id} {row.status}: cycle {row.cycles}, {counted(row.facts_count, 'fact')}"
                ),
            )
            if row.status == RunStatus.STOPPED or (
                row.status == RunStatus.PAUSED and _waits(store, run_id)
            ):
                return row
            if timeout is not None and clock() - started >= timeout:
                return None
            wait(WATCH_POLL_S)
