"""How ``converge serve`` listens: the uvicorn settings of the inbox.

Who a request comes from is the connection's peer address (the sign-in limits of
:mod:`converge.web.limits` count failures per address). ``X-Forwarded-For`` and
``X-Forwarded-Proto`` are honoured only from the proxies the operator lists
(``--forwarded-allow-ips``, as uvicorn's option of that name): a client cannot
choose the address it is counted under, nor lock another address out. uvicorn's
own default trusts 127.0.0.1, which let any local client spoof the header; here
nothing is trusted unless listed.
"""

from __future__ import annotations

import threading
from types import FrameType

import uvicorn
from fastapi import FastAPI

from converge.service.readiness import Readiness

__all__ = ["GRACEFUL_SHUTDOWN_S", "DrainingServer", "server_config"]

GRACEFUL_SHUTDOWN_S = 3
"""Seconds uvicorn waits for requests in flight after SIGTERM before closing them
(``converge serve`` stops within 10 s: this, then its worker processes)."""


def server_config(
    app: FastAPI,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    forwarded_allow_ips: str | None = None,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    log_level: str = "info",
    lifespan: str = "auto",
    own_logging: bool = False,
) -> uvicorn.Config:
    """The uvicorn settings serving ``app`` on ``host``:``port``.

    ``forwarded_allow_ips``: comma-separated addresses or networks of the proxies
    whose ``X-Forwarded-*`` headers are believed (``*``: any peer; None or empty:
    none, the peer address is the client's). ``tls_cert`` / ``tls_key``: PEM files
    to serve HTTPS. ``own_logging``: uvicorn's error and access lines go to the
    handlers of the root logger (:func:`converge.logs.configure_logging`) instead
    of uvicorn's own.
    """
    trusted = (forwarded_allow_ips or "").strip()
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        log_config=None if own_logging else uvicorn.config.LOGGING_CONFIG,
        lifespan=lifespan,  # type: ignore[arg-type]  # uvicorn's Literal
        proxy_headers=bool(trusted),
        forwarded_allow_ips=trusted or None,
        ssl_certfile=tls_cert,
        ssl_keyfile=tls_key,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
    )


class DrainingServer(uvicorn.Server):
    """A uvicorn server that, at its first SIGTERM or SIGINT, turns ``readiness`` false
    at once and goes on taking requests for ``drain_s`` seconds (a load balancer or
    a kubelet sees ``/readyz`` answer 503 and stops sending), then shuts down as
    uvicorn does (requests in flight get :data:`GRACEFUL_SHUTDOWN_S`). A second
    signal while draining shuts down at once."""

    def __init__(self, config: uvicorn.Config, readiness: Readiness, drain_s: float) -> None:
        super().__init__(config)
        self.readiness = readiness
        self.drain_s = drain_s
        self._timer: threading.Timer | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """The signal handler uvicorn installs (see the class)."""
        if self.readiness.draining or self.drain_s <= 0:
            self.readiness.drain()
            if self._timer is not None:
                self._timer.cancel()
            super().handle_exit(sig, frame)
            return
        self.readiness.drain()
        stop = super().handle_exit
        self._timer = threading.Timer(self.drain_s, stop, (sig, frame))
        self._timer.daemon = True
        self._timer.start()
