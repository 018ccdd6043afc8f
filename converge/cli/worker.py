"""``converge worker``: a Celery worker running suggestors and whole runs (docs/service.md)."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from types import FrameType
from typing import Annotated

import typer

from audit.ledger import require_key, start_sequencing
from audit.run_queue import DEFAULT_LEASE_S, LEASE_ENV, requeue_stopped
from audit.store import SqlRunStore
from converge.cli.commands import CommandGroup
from converge.cli.logformat import LogFormatOption, start_logging
from converge.cli.render import (
    BAD_INPUT,
    DbOption,
    fail,
    failing_on,
    missing_sqlite_file,
    open_sql_store,
    out,
    say_error,
)
from converge.interrupts import SIGNALS, Shutdown
from converge.logs import LOG_FORMAT_ENV, LogFormat
from converge.run_queue import Action
from converge.service import (
    DeadlineKeeper,
    ExpiredLeases,
    LocalRunPool,
    execute_run,
    preload_jobs,
    recover_runs,
)
from converge.service.deadlines import KEEP_EVERY_S
from converge.service.pool_lines import answer_line, read_message
from engine import ConvergeError, StopReason, UserCancelled, check_run_id
from engine.result import counted

app = CommandGroup()
log = logging.getLogger("converge.worker")

LeaseOption = Annotated[
    float | None,
    typer.Option(
        "--lease-seconds",
        min=0.1,
        help=f"Lease of the runs it holds, renewed every third of it; a run whose lease "
        f"expired is taken over by another worker (${LEASE_ENV}, default {DEFAULT_LEASE_S:g}).",
    ),
]
"""``--lease-seconds`` (docs/scale-out.md)."""

HealthPortOption = Annotated[
    int | None,
    typer.Option(
        "--health-port",
        min=0,
        max=65535,
        help="Serve /healthz, /readyz and /metrics on this port (docs/operations.md).",
    ),
]
"""``--health-port``: the worker's operator port (:mod:`converge.workers.health`)."""
HealthHostOption = Annotated[str, typer.Option("--health-host", help="Interface of --health-port.")]

PARENT_POLL_S = 0.2
"""How often (seconds) ``worker --run --parent PID`` checks that its parent lives."""
POOL_NICE = 10
"""How much lower a pool process (``--runs-from-stdin``) runs than its server."""


@app.command()
def worker(
    broker: Annotated[
        str | None,
        typer.Option(
            "--broker", help="Broker URL, e.g. amqp://guest:guest@host:5672// ($CONVERGE_BROKER)."
        ),
    ] = None,
    backend: Annotated[
        str | None,
        typer.Option(
            "--backend",
            help="Result backend URL, e.g. redis://host:6379/0 (needed for suggestor tasks).",
        ),
    ] = None,
    queue: Annotated[str, typer.Option("--queue", help="The queue to consume.")] = "converge",
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, help="Worker processes.")] = 1,
    hostname: Annotated[
        str | None, typer.Option("--hostname", help="Celery node name (default from the pid).")
    ] = None,
    loglevel: Annotated[str, typer.Option("--loglevel", help="Celery log level.")] = "WARNING",
    db: DbOption = None,
    recover: Annotated[
        bool,
        typer.Option(
            "--recover",
            help="Send again the runs no worker is executing, then exit; without a broker, "
            "execute them here (--concurrency processes) to their next stop.",
        ),
    ] = False,
    run_id: Annotated[
        str | None,
        typer.Option("--run", help="Execute this one run here, without a broker, then exit."),
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="With --run: resume it (its gate was decided).")
    ] = False,
    parent: Annotated[
        int | None,
        typer.Option(
            "--parent", hidden=True, help="With --run or --runs-from-stdin: stop when it is gone."
        ),
    ] = None,
    runs_from_stdin: Annotated[
        bool,
        typer.Option(
            "--runs-from-stdin",
            hidden=True,
            help="Execute the runs named on stdin one after the other (converge serve's pool).",
        ),
    ] = False,
    lease_seconds: LeaseOption = None,
    health_port: HealthPortOption = None,
    health_host: HealthHostOption = "127.0.0.1",
    log_format: LogFormatOption = LogFormat.text,
) -> None:
    """Run suggestors and whole runs sent to a queue, until stopped.

    Executes the suggestor tasks of `Engine(executor=CeleryExecutor(...))` and the
    runs of `converge submit` and `approve --detach`, over the store of --db
    ($CONVERGE_DB). At start it sends again the runs that no worker is executing
    (queued, or crashed with their worker). Start it where the jobs' modules
    import. Needs the 'workers' extra, except with --run and with --recover
    without a broker (it then executes those runs itself, in --concurrency
    processes, and exits once they stopped).

    SIGTERM stops it within 10 s: its runs in flight are cancelled at their next
    cycle boundary (checkpointed, resumable; with a broker their resumes go back to
    the queue for another worker), or left as a crash leaves them when a cycle does
    not end in time (the next worker recovers them).

    Each run it holds has a lease in the store, renewed every third of
    --lease-seconds; a run whose lease expired (its host died, hung or was cut
    off: docs/scale-out.md) is sent again and claimed by another worker.

    --health-port serves /healthz, /readyz and /metrics (docs/operations.md).
    Its log lines (Celery's included) go to stderr, as text or with --log-format
    json one JSON object a line (docs/service.md).
    """
    start_logging(log_format, "pool" if runs_from_stdin else "worker")
    if run_id is not None:
        with failing_on(ConvergeError):
            check_run_id(run_id, "--run")
    _check_key(db)  # refused: this process's environment is left as it was
    if lease_seconds is not None:  # the worker processes open their stores with it
        os.environ[LEASE_ENV] = repr(lease_seconds)
    if db:
        os.environ["CONVERGE_DB"] = db  # the worker processes open the store themselves
    if run_id is not None:
        _run_here(db, run_id, resume, parent)
        return
    if runs_from_stdin:
        _serve_pool(db, parent)
        return
    url = broker or os.environ.get("CONVERGE_BROKER")
    if not url and recover:
        _recover_here(db, concurrency)
        return
    if not url:
        fail("converge worker needs --broker (or $CONVERGE_BROKER), or --run RUN")
    health = None if health_port is None or recover else (health_host, health_port)
    _consume(url, backend, queue, concurrency, hostname, loglevel, db, recover, health)


def _recover_here(db: str | None, concurrency: int) -> None:
    """``--recover`` without a broker: the runs no process is executing (queued, put
    back, crashed, decided resumes) executed here, in ``concurrency`` worker
    processes (as ``converge serve``'s pool), to their next stop; returns once they
    all stopped. SIGTERM or SIGINT stop them at their cycle boundary (put back in
    the queue) and exit 130."""
    store = open_sql_store(db)
    pool = LocalRunPool(store, concurrency)
    for signum in SIGNALS:
        signal.signal(signum, _interrupted)
    try:
        sent = recover_runs(store, pool)
        pool.wait()
    except ConvergeError as exc:
        fail(str(exc))
    finally:
        pool.close()
        store.close()
    out.print(
        f"recovered {counted(len(sent), 'run')}: {', '.join(sent) or 'none'}", highlight=False
    )


def _interrupted(signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(130)


def _consume(
    url: str,
    backend: str | None,
    queue: str,
    concurrency: int,
    hostname: str | None,
    loglevel: str,
    db: str | None,
    recover: bool,
    health: tuple[str, int] | None = None,
) -> None:
    """The Celery worker on ``url``'s ``queue``, after the runs no worker executes
    were sent again (only that with ``recover``), beside its deadline keeper; with
    ``health`` (host, port), its operator port (:mod:`converge.workers.health`)."""
    if health is not None:  # before prometheus_client is imported, by anyone
        from converge.service.metering import shared_directory

        shared_directory()
    try:
        from converge.workers import CeleryRunQueue, run_worker
    except ImportError as exc:
        fail(str(exc))
    store = open_sql_store(db, must_exist=False)
    runs = CeleryRunQueue(url, queue)
    store_url = store.url
    try:
        sent = recover_runs(store, runs)
        if not recover:  # imported before the pool's processes fork: they inherit them
            preload_jobs(store)
    except ConvergeError as exc:
        fail(str(exc))
    finally:
        runs.close()
        store.close()  # the worker processes open their own
    if sent:
        out.print(f"sent again {counted(len(sent), 'run')}: {', '.join(sent)}", highlight=False)
    if recover:
        return
    # a process of its own keeps the gates' deadlines: this one forks the pool's
    # processes, and a store connection open across a fork (a SQLite file's locks)
    # can block the children's writes for good
    code = (
        "import sys; from converge.cli.worker import keep_deadlines; keep_deadlines(*sys.argv[1:])"
    )
    keeper = subprocess.Popen([sys.executable, "-c", code, db or "", url, queue, str(os.getpid())])
    server = None
    if health is not None:
        from converge.workers.health import start_health

        server = start_health(url, store_url, *health)
        out.print(f"health and metrics on http://{health[0]}:{server.port}", highlight=False)
    try:
        run_worker(
            url,
            backend,
            queue=queue,
            concurrency=concurrency,
            hostname=hostname,
            loglevel=loglevel,
            own_logging=True,  # converge.logs, in --log-format
        )
    finally:
        if server is not None:
            server.stop()
        keeper.terminate()
        keeper.wait()


def _check_key(db: str | None) -> None:
    """Exit 2 before starting when the store is keyed and this process has not its
    key: every run, resume and deadline the worker takes would be refused."""
    if missing_sqlite_file(db) is not None:
        return  # no store yet: nothing keyed (--run says the store is missing)
    store = open_sql_store(db, must_exist=False)
    try:
        require_key(store, "starting converge worker")
    except ConvergeError as exc:
        fail(str(exc))
    finally:
        store.close()


def keep_deadlines(db: str, broker: str, queue: str, parent: str) -> None:
    """The deadline keeper and ledger sequencer of ``converge worker``, in its own
    process: applies the store's gate deadlines, sending the resumes to ``queue``,
    sends again the runs whose lease expired (:class:`converge.service.ExpiredLeases`),
    and integrates pending run heads into the ledger, until process ``parent`` (the
    worker) is gone. Logs as the worker ($CONVERGE_LOG_FORMAT, which it set)."""
    start_logging(LogFormat(os.environ.get(LOG_FORMAT_ENV) or "text"), "worker")
    store = open_sql_store(db or None, must_exist=False)
    from converge.workers import CeleryRunQueue

    runs = CeleryRunQueue(broker, queue)
    keeper = DeadlineKeeper(store, runs, expired=ExpiredLeases(store, runs)).start()
    # and integrates the run heads the worker's processes commit into the ledger
    sequencer = start_sequencing(store, store.signer)
    while os.getppid() == int(parent):
        time.sleep(KEEP_EVERY_S)
    keeper.stop()
    sequencer.stop()


def _run_here(db: str | None, run_id: str, resume: bool, parent: int | None) -> None:
    """``--run``: the run's next stop decides the exit code (0 when nothing was left to
    do; 130 when SIGTERM, SIGINT or the end of process ``parent`` cancelled it)."""
    shutdown = _stopping(Shutdown(), parent)
    with shutdown.executing():  # a stop asked while the store opens waits for the run
        store = open_sql_store(db)
        try:
            code = _execute_message(store, shutdown, "resume" if resume else "run", run_id)
        finally:
            store.close()
    if code:
        raise typer.Exit(code)


def _serve_pool(db: str | None, parent: int | None) -> None:
    """``--runs-from-stdin``: a process of ``converge serve``'s pool
    (:class:`converge.service.LocalRunPool`), started once and reused. It executes
    the messages read from stdin, one JSON line each (:mod:`converge.service.pool_lines`:
    ``{"action": "run" | "resume", "run_id": ID}``), one after the other over one
    store opened once, and answers each with a line ``POOL_DONE {"run_id", "code"}``
    on stdout (code as ``--run``'s exit code; 2 for a message it could not execute,
    said on stderr), until stdin ends. SIGTERM, SIGINT or the end of process
    ``parent`` end it at once when idle, else once its run stopped at a cycle
    boundary (as ``--run``), the run put back in the queue for the next pool
    (:func:`audit.run_queue.requeue_stopped`)."""
    # a pool process yields the CPU to the server that started it, which answers
    # people: its start (imports, the store) and its runs never delay an answer
    with contextlib.suppress(OSError):
        os.nice(POOL_NICE)
    shutdown = _stopping(Shutdown(exit_when_idle=True), parent)
    store = open_sql_store(db)
    try:
        for line in sys.stdin:
            message = read_message(line)
            if message is None:
                say_error(f"not a run message: {line.strip()[:200]!r}")
                print(answer_line(None, BAD_INPUT), flush=True)
                continue
            code = _execute_message(store, shutdown, message.action, message.run_id, requeue=True)
            print(answer_line(message.run_id, code), flush=True)
    finally:
        store.close()


def _execute_message(
    store: SqlRunStore, shutdown: Shutdown, action: Action, run_id: str, *, requeue: bool = False
) -> int:
    """Execute ``action`` on ``run_id`` here (``--run``, or a message of the pool):
    the exit code of the run's next stop (0 when nothing was left to do, 2, said on
    stderr, when it could not be executed). ``requeue``: a run this process's stop
    cancelled goes back to the queue (``queued``) before the process may end."""
    try:
        with shutdown.executing():
            result = execute_run(store, run_id, action, prepare=shutdown.track)
            if requeue and result is not None and shutdown.requested.is_set():
                _put_back(store, run_id, result.stop_reason)
    except ConvergeError as exc:
        say_error(str(exc))
        return BAD_INPUT
    return 0 if result is None else result.stop_reason.exit_code


def _put_back(store: SqlRunStore, run_id: str, stop: StopReason) -> None:
    """A run cancelled because this process is stopping goes back to the queue, for
    the next ``converge serve`` (or ``converge worker --recover``) to go on with."""
    if isinstance(stop, UserCancelled) and requeue_stopped(store, run_id):
        log.warning(
            "run %s: stopped with this worker, put back in the queue", run_id,
            extra={"event": "run_put_back", "run_id": run_id},
        )  # fmt: skip


def _stopping(shutdown: Shutdown, parent: int | None) -> Shutdown:
    """``shutdown``, asked by SIGTERM and SIGINT, and by the end of process ``parent``."""
    for signum in SIGNALS:
        signal.signal(signum, shutdown.on_signal)
    if parent is not None:
        threading.Thread(target=_orphaned, args=(parent, shutdown), daemon=True).start()
    return shutdown


def _orphaned(parent: int, shutdown: Shutdown) -> None:
    """Stop (as on SIGTERM) once process ``parent`` (``converge serve``) is gone,
    even killed with -9: its pool's runs do not go on unseen."""
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    shutdown.request()
