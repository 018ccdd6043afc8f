"""Runs as a service, on the store's side: queued runs, their taking,
cancel requests, the lease length of the runs this process holds (``_queue``;
docs/service.md, docs/scale-out.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from audit.lazy import face

if TYPE_CHECKING:
    from audit.run_queue._queue import (
        DEFAULT_LEASE_S,
        LEASE_ENV,
        cancel_requested,
        clear_cancel,
        lease_seconds,
        queue_run,
        request_cancel,
        runs_to_recover,
        take_queued,
    )

__all__ = [
    "DEFAULT_LEASE_S",
    "LEASE_ENV",
    "cancel_requested",
    "clear_cancel",
    "lease_seconds",
    "queue_run",
    "request_cancel",
    "runs_to_recover",
    "take_queued",
]

if not TYPE_CHECKING:
    __getattr__ = face(__name__, __all__, ("_queue",))
