"""``converge serve``: the approval inbox (FastAPI + uvicorn, extra ``web``)."""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable, Collection
from types import FrameType
from typing import Annotated

import typer

from audit.ledger import require_key, start_sequencing
from audit.store import SqlRunStore
from converge.access import MetricsAccess
from converge.cli.commands import CommandGroup
from converge.cli.logformat import LogFormatOption, start_logging
from converge.cli.render import DbOption, fail, open_sql_store
from converge.cli.service import BrokerOption, QueueOption
from converge.interrupts import SIGNALS
from converge.logs import LogFormat
from converge.service import (
    BackgroundQueue,
    DeadlineKeeper,
    ExpiredLeases,
    LocalRunPool,
    RunQueue,
    recover_runs,
)
from converge.service.metering import shared_directory
from converge.service.readiness import Readiness, store_current
from engine import ConvergeError

app = CommandGroup()

DRAIN_S = 1.0
"""Default ``--drain-seconds``: /readyz answers 503 this long after SIGTERM before the
server stops taking requests (within the 10 s a stop may take: docs/operations.md)."""
MetricsOption = Annotated[
    MetricsAccess,
    typer.Option(
        "--metrics",
        envvar="CONVERGE_METRICS",
        help="Who reads GET /metrics: an admin's token (token), also clients on "
        "127.0.0.1 (local), or anyone (public).",
    ),
]
DrainOption = Annotated[
    float,
    typer.Option(
        "--drain-seconds",
        min=0.0,
        max=5.0,
        help="After SIGTERM, /readyz answers 503 this long before the server stops "
        "taking requests (a load balancer's time to notice).",
    ),
]


@app.command("serve")
def serve_cmd(
    host: Annotated[str, typer.Option("--host", help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="TCP port.")] = 8000,
    db: DbOption = None,
    broker: BrokerOption = None,
    queue: QueueOption = "converge",
    pool: Annotated[
        int, typer.Option("--pool", min=1, help="Without a broker: worker processes at once.")
    ] = 2,
    tls_cert: Annotated[
        str | None, typer.Option("--tls-cert", help="PEM certificate: serve HTTPS.")
    ] = None,
    tls_key: Annotated[
        str | None, typer.Option("--tls-key", help="PEM private key of --tls-cert.")
    ] = None,
    forwarded_allow_ips: Annotated[
        str | None,
        typer.Option(
            "--forwarded-allow-ips",
            envvar="CONVERGE_FORWARDED_ALLOW_IPS",
            help="Proxies (comma-separated addresses) whose X-Forwarded-For is believed.",
        ),
    ] = None,
    metrics_access: MetricsOption = MetricsAccess.TOKEN,
    drain_seconds: DrainOption = DRAIN_S,
    log_format: LogFormatOption = LogFormat.text,
) -> None:
    """Serve the approval inbox: pending gates, gate and run pages, the JSON API.

    A decision answers at once: the run's resume goes to the workers of --broker
    ($CONVERGE_BROKER), or without one to at most --pool worker processes that this
    server starts (`converge worker --run`), never into the request nor this
    process. The server also applies the gates' deadlines on time. With --tls-cert
    and --tls-key it serves HTTPS (session cookies are then Secure). Clients are
    known by their connection's address (sign-in limits count per address);
    X-Forwarded-For is believed only from the proxies of --forwarded-allow-ips.
    Several servers of one store behind a proxy share $CONVERGE_WEB_SECRET, the
    key of their forms' CSRF tokens (docs/scale-out.md).

    GET /healthz, /readyz and /metrics serve the operator (docs/operations.md).

    SIGTERM (or Ctrl-C) stops it within 10 s: /readyz answers 503 at once and the
    server goes on answering for --drain-seconds, then requests in flight get 3 s,
    the runs of its worker processes stop at their next cycle boundary and go back
    to the queue. Without a broker, it takes up at start what no process executes (queued
    runs, runs put back or crashed, decided resumes), as `converge worker --recover`.

    Its log lines, uvicorn's access lines and its worker processes' go to stderr,
    as text or with --log-format json one JSON object a line (docs/service.md).
    """
    start_logging(log_format, "serve")
    if (tls_cert is None) != (tls_key is None):
        fail("--tls-cert and --tls-key go together")
    shared_directory()  # the pool's metrics, summed: before prometheus_client loads
    try:
        from converge.web import create_app
        from converge.web.serving import DrainingServer, server_config
    except ImportError as exc:
        fail(f"converge serve needs the 'web' extra: pip install 'converge-engine[web]' ({exc})")
    store = open_sql_store(db, must_exist=False)
    try:  # a keyed store: its decisions and deadlines need the key, checked now
        require_key(store, "starting converge serve")
    except ConvergeError as exc:
        store.close()
        fail(str(exc))
    runs, waiting, closing, readiness = _run_queue(store, broker, queue, pool)
    # and sends again the runs whose lease expired (their host died: docs/scale-out.md);
    # without a broker, the queued runs its pool has not (put back by a process that
    # stopped after this server started, or left by another server)
    expired = ExpiredLeases(store, runs, waiting=waiting)
    keeper = DeadlineKeeper(store, runs, expired=expired).start()
    # run heads committed by any process reach the ledger within the store's delay
    sequencer = start_sequencing(store, store.signer)
    # uvicorn raises the signal it caught again once it shut down: this handler
    # turns it into an exit through the finally below (the default would kill us)
    for signum in SIGNALS:
        signal.signal(signum, _stop)
    try:
        app = create_app(store, run_queue=runs, readiness=readiness, metrics_access=metrics_access)
        config = server_config(
            app,
            host,
            port,
            forwarded_allow_ips=forwarded_allow_ips,
            tls_cert=tls_cert,
            tls_key=tls_key,
            own_logging=True,  # through converge.logs, in --log-format
        )
        DrainingServer(config, readiness, drain_seconds).run()
    finally:
        keeper.stop()
        sequencer.stop()
        for close in closing:
            close()
        store.close()
        _leave_handlers_behind()


def _run_queue(
    store: SqlRunStore, broker: str | None, queue: str, pool: int
) -> tuple[RunQueue, Callable[[], Collection[str]] | None, list[Callable[[], object]], Readiness]:
    """Where the server's runs go: the Celery workers of ``broker`` (``$CONVERGE_BROKER``),
    or without one a pool of ``pool`` worker processes, which takes up at once what
    no process executes; with the runs that pool has (None with a broker), what
    to close, in order, once the server stopped, and the server's readiness (the
    store, then the pool or the broker). Exits 2 when the store fails."""
    readiness = Readiness({"store": store_current(store)})
    url = broker or os.environ.get("CONVERGE_BROKER")
    if url:
        try:
            from converge.workers import CeleryRunQueue
        except ImportError as exc:
            fail(f"{exc} (a broker needs the 'workers' extra)")
        celery = CeleryRunQueue(url, queue)
        # published by a thread of its own, on a connection made now: an answer
        # never waits for the broker (a resume not sent is recovered from the store)
        background = BackgroundQueue(celery, connect=celery.connect)
        from converge.workers.health import broker_reachable

        readiness.add("broker", broker_reachable(url))
        return background, None, [background.close, celery.close], readiness
    local = LocalRunPool(store, pool)
    # no broker: nobody else takes up what a stopped or killed server left (queued
    # runs, runs put back or crashed, decided resumes): its successor does, now
    try:
        recover_runs(store, local)
    except ConvergeError as exc:
        local.close()
        store.close()
        fail(str(exc))
    readiness.add("pool", lambda: local.accepting)
    return local, local.pending, [local.close], readiness


def _stop(signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(0)


def _leave_handlers_behind() -> None:
    """Exit now when a request handler's thread still runs (uvicorn cancelled its
    task, not the thread): the interpreter would wait for it at exit."""
    main = threading.main_thread()
    if any(t.is_alive() and not t.daemon and t is not main for t in threading.enumerate()):
        logging.shutdown()
        os._exit(0)
