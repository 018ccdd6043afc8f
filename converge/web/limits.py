"""Failed sign-ins and unknown API tokens, rate-limited per client, across servers.

After ``limit`` failures in ``window_s`` seconds from one client (its address), its
further attempts are answered ``429 Too Many Requests`` with ``Retry-After`` until
the window has moved on, whatever the token: guessing is slowed, and the owner of
a right token signs in again once the window passed.

The failures are the access log's own rows (``outcome`` 401, written for every
failure by :func:`converge.web.auth.checked_token`), so every server of one store
counts them together: two ``converge serve`` behind one proxy limit a client as one
(docs/access.md). ``clock`` (unix seconds) is injectable for tests; the rows are
written with its time.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from audit.people import failures_since
from audit.store import SqlRunStore

FAILURES_PER_WINDOW = 10
WINDOW_S = 60.0


class FailureLimiter:
    """Counts a client's failures (access-log rows of ``store``) over a sliding window
    of ``window_s`` seconds; ``limit`` of them and the client waits."""

    def __init__(
        self,
        store: SqlRunStore,
        limit: int = FAILURES_PER_WINDOW,
        window_s: float = WINDOW_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.limit = limit
        self.window_s = window_s
        self.clock = clock

    def retry_after(self, client: str) -> int | None:
        """Seconds ``client`` must wait while it is over the limit, else None."""
        now = self.clock()
        seen = failures_since(self.store, client, now - self.window_s, self.limit)
        if len(seen) < self.limit:
            return None
        return max(1, math.ceil(seen[0] + self.window_s - now))
