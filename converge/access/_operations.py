"""What the access policy says of the routes an operator's tools call: the routes
that act for nobody (:data:`PUBLIC_ROUTES`: signing in and out, the API's
document, the health probes), and who may read ``GET /metrics``
(:class:`MetricsAccess`, ``converge serve --metrics``; docs/operations.md).

The probes answer a status word and nothing else (no URL, version or error), so
they are public: a load balancer or a kubelet carries no token. The metrics say
how busy the service is and how its runs end: by default only an admin's token
reads them (:attr:`~converge.access.Action.READ_METRICS`, asked of the policy
like any action); ``--metrics local`` opens them to clients on the loopback
interface (a Prometheus beside the server), ``--metrics public`` to anyone who
reaches the port (behind a network boundary of the operator's).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

__all__ = ["LOOPBACK", "PUBLIC_ROUTES", "MetricsAccess", "metrics_open"]

PUBLIC_ROUTES: Final[frozenset[tuple[str, str]]] = frozenset(
    {
        ("GET", "/login"),
        ("POST", "/login"),
        ("POST", "/logout"),
        ("GET", "/api/openapi.json"),
        ("GET", "/healthz"),
        ("GET", "/readyz"),
    }
)
"""The routes (method, path) that act for nobody and ask the policy nothing."""

LOOPBACK: Final = frozenset({"127.0.0.1", "::1", "localhost"})
"""The client addresses ``--metrics local`` opens the metrics to."""


class MetricsAccess(StrEnum):
    """Who reads ``GET /metrics`` without a token (``converge serve --metrics``)."""

    TOKEN = "token"  # nobody: an admin's token (the default)
    LOCAL = "local"  # clients on the loopback interface; others need an admin's token
    PUBLIC = "public"  # anyone who reaches the port


def metrics_open(access: MetricsAccess, client: str | None) -> bool:
    """Whether ``client`` (the request's peer address, or the forwarded one a trusted
    proxy gave) reads the metrics without a token under ``access``; when False the
    route asks the policy for :attr:`~converge.access.Action.READ_METRICS`."""
    if access == MetricsAccess.PUBLIC:
        return True
    return access == MetricsAccess.LOCAL and client in LOOPBACK
