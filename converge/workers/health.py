"""A worker's operator port: ``converge worker --health-port N`` serves ``GET
/healthz``, ``GET /readyz`` and ``GET /metrics`` over plain HTTP from a thread of
the worker's main process, for a kubelet's probes, systemd's watchdog script and
Prometheus (docs/operations.md).

- ``/healthz``: ``ok`` while the main process answers;
- ``/readyz``: ``ready`` once the Celery consumer started, while the broker and the
  store answer and until the warm shutdown starts (SIGTERM); else 503 ``not
  ready``. Why goes to the worker's log, never to the prober;
- ``/metrics``: the Prometheus text of every process of the worker (its prefork
  pool processes and its deadline keeper write to the directory of
  ``PROMETHEUS_MULTIPROC_DIR``; :mod:`converge.metrics`), and the depth of the
  store's queue.

The port is meant for a private interface (the default host is 127.0.0.1): it asks
for no token, and says nothing but those words and the metrics.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sqlalchemy import create_engine, select
from sqlalchemy.pool import NullPool

from audit.tables import SCHEMA_VERSION, meta
from converge.service.readiness import Check, Readiness

__all__ = ["HealthServer", "broker_reachable", "store_answers"]

log = logging.getLogger("converge.worker")

BROKER_TIMEOUT_S = 2.0
"""How long a readiness probe waits for the broker (seconds)."""


def broker_reachable(url: str, timeout: float = BROKER_TIMEOUT_S) -> Check:
    """The check that the broker at ``url`` accepts a connection within ``timeout``."""

    def check() -> bool:
        from kombu import Connection  # type: ignore[attr-defined]

        with Connection(url, connect_timeout=timeout) as conn:  # type: ignore[no-untyped-call]
            conn.ensure_connection(max_retries=1, timeout=timeout)
        return True

    return check


def store_answers(url: str) -> Check:
    """The check that the store at SQLAlchemy ``url`` answers with the current schema,
    on a connection opened for the probe and closed after it (the worker's main
    process keeps none open across its pool's forks)."""

    def check() -> bool:
        engine = create_engine(url, poolclass=NullPool)
        try:
            with engine.connect() as conn:
                version = conn.execute(
                    select(meta.c.value).where(meta.c.key == "schema_version")
                ).scalar()
        finally:
            engine.dispose()
        return version == str(SCHEMA_VERSION)

    return check


class HealthServer:
    """The operator port on ``host``:``port`` (0: a free one, :attr:`port` says
    which), answering from ``readiness`` and ``metrics_text`` (the exposition's
    bytes); :meth:`start` serves from a daemon thread, :meth:`stop` ends it."""

    def __init__(
        self,
        readiness: Readiness,
        metrics_text: Callable[[], bytes],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        content_type: str = "text/plain; version=0.0.4; charset=utf-8",
    ) -> None:
        self.readiness = readiness
        self.metrics_text = metrics_text
        self.content_type = content_type
        self.server = ThreadingHTTPServer((host, port), self._handler())
        self.server.daemon_threads = True
        self.port: int = self.server.server_address[1]
        self._thread: threading.Thread | None = None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/healthz":
                    self._answer(200, b"ok\n")
                elif path == "/readyz":
                    ready = outer.readiness.ready()
                    self._answer(200 if ready else 503, b"ready\n" if ready else b"not ready\n")
                elif path == "/metrics":
                    try:
                        body = outer.metrics_text()
                    except Exception as exc:  # a scrape failing says so, in our log
                        log.warning("metrics not collected: %s", type(exc).__name__)
                        self._answer(500, b"metrics not collected\n")
                        return
                    self._answer(200, body, outer.content_type)
                else:
                    self._answer(404, b"not found\n")

            def _answer(
                self, status: int, body: bytes, ctype: str = "text/plain; charset=utf-8"
            ) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return  # probes every few seconds: not worth a log line each

        return Handler

    def start(self) -> HealthServer:
        """Serve from a daemon thread; returns this server."""
        self._thread = threading.Thread(
            target=self.server.serve_forever, name="converge-health", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the port."""
        self.server.shutdown()
        self.server.server_close()


def start_health(broker_url: str, store_url: str, host: str, port: int) -> HealthServer:
    """The operator port of ``converge worker`` (see the module), serving: ready once
    Celery's ``worker_ready`` fired, until its ``worker_shutting_down``, while the
    broker and the store answer. Call it after
    :func:`converge.service.metering.shared_directory`, before the worker starts."""
    from celery.signals import worker_ready, worker_shutting_down

    from converge import metrics

    consuming = threading.Event()
    readiness = Readiness(
        {
            "consumer": consuming.is_set,
            "broker": broker_reachable(broker_url),
            "store": store_answers(store_url),
        }
    )

    def started(**_: Any) -> None:
        consuming.set()

    def stopping(**_: Any) -> None:
        readiness.drain()

    worker_ready.connect(started, weak=False)
    worker_shutting_down.connect(stopping, weak=False)
    return HealthServer(
        readiness, metrics.exposition, host=host, port=port, content_type=metrics.CONTENT_TYPE
    ).start()
