"""Failed sign-ins and unknown API tokens, rate-limited per client and per name.

After ``limit`` failures in ``window_s`` seconds from one client (its address), or
naming one person (a sign-in form's ``name``; an API token's owner is unknown when
it fails), further attempts are answered ``429 Too Many Requests`` with
``Retry-After`` until the window has moved on, whatever the token: guessing is
slowed, and the owner of a right token signs in again once the window passed.
Every failure and refusal goes to the access log (``audit.people._people``). Kept in this
process's memory (one server); ``clock`` is injectable for tests.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable

FAILURES_PER_WINDOW = 10
WINDOW_S = 60.0


class FailureLimiter:
    """Counts failures per key over a sliding window of ``window_s`` seconds."""

    def __init__(
        self,
        limit: int = FAILURES_PER_WINDOW,
        window_s: float = WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit = limit
        self.window_s = window_s
        self.clock = clock
        self._failures: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def _recent(self, key: str, now: float) -> deque[float]:
        seen = self._failures.setdefault(key, deque())
        while seen and seen[0] <= now - self.window_s:
            seen.popleft()
        return seen

    def retry_after(self, *keys: str) -> int | None:
        """Seconds to wait when any of ``keys`` is over its limit, else None."""
        now = self.clock()
        with self._lock:
            waits = [
                seen[0] + self.window_s - now
                for key in keys
                if len(seen := self._recent(key, now)) >= self.limit
            ]
        return max(1, math.ceil(max(waits))) if waits else None

    def failed(self, *keys: str) -> None:
        """Count one failure against each of ``keys``."""
        now = self.clock()
        with self._lock:
            for key in keys:
                self._recent(key, now).append(now)
