"""Ctrl-C and SIGTERM end a run gracefully: ``UserCancelled``, recorded, checkpointed.

The first SIGINT or SIGTERM asks the engine to cancel its runs in flight: async
suggestors in flight are cut within ``engine._cycle.execute.CANCEL_POLL_S`` (50 ms),
sync ones finish their cycle, and the run stops with ``UserCancelled`` (exit 130),
its facts kept and a checkpoint written, so ``converge resume RUN`` goes on. A
second SIGINT interrupts at once (``KeyboardInterrupt``): the run is then left as
its last committed cycle shows (``crashed``), which ``converge resume`` recovers too.

A worker (``converge worker``, and the processes of ``converge serve``'s pool) stops
the same way on SIGTERM with a :class:`Shutdown`, within a grace period.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from engine import Engine

SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def cancel_on_signals(engine: Engine) -> Iterator[None]:
    """While inside, SIGINT / SIGTERM cancel ``engine``'s runs (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        received.append(signum)
        if len(received) > 1 and signum == signal.SIGINT:
            raise KeyboardInterrupt
        engine.cancel()

    previous = {s: signal.signal(s, on_signal) for s in SIGNALS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


GRACE_S = 8.0
"""How long (seconds) a worker told to stop lets its runs reach a cycle boundary
before it exits anyway (its runs are then left ``crashed``, which a worker recovers)."""
RECANCEL_EVERY_S = 0.05
"""How often (seconds) a stopping worker cancels its engines again."""
TERMINATED = 128 + signal.SIGTERM
"""The exit code of a worker whose grace period ended (143, as a death by SIGTERM)."""


class Shutdown:
    """A worker process told to stop (SIGTERM): every run it executes is cancelled
    at its next cycle boundary (``UserCancelled``, checkpointed, resumable).

    The worker wraps each run in :meth:`executing` and passes :meth:`track` as the
    ``prepare`` hook of ``execute_run`` (each engine built here). :meth:`request`
    ends an idle process at once (exit code 143); otherwise it cancels the runs in
    flight and, if they have not stopped ``grace_s`` seconds later, ends the process
    anyway (``os._exit``: a cycle that does not end is left as a crash leaves it,
    ``crashed``, for another worker to recover). ``exit_when_idle``: also end it
    once they stopped (a pool process, which would otherwise take the next run).
    """

    def __init__(self, grace_s: float = GRACE_S, *, exit_when_idle: bool = False) -> None:
        self.grace_s = grace_s
        self.exit_when_idle = exit_when_idle
        self.requested = threading.Event()
        self._engines: weakref.WeakSet[Engine] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._busy = 0

    @contextmanager
    def executing(self) -> Iterator[None]:
        """While inside, this process executes a run (a stop waits for its boundary)."""
        with self._lock:
            self._busy += 1
        try:
            yield
        finally:
            with self._lock:
                self._busy -= 1

    def track(self, engine: Engine) -> None:
        """Cancel ``engine``'s runs when the stop is asked (also when it was already)."""
        with self._lock:
            self._engines.add(engine)

    def request(self) -> None:
        """Stop: at once when idle, else once the runs in flight stopped (``grace_s`` at most)."""
        with self._lock:
            idle, again = self._busy == 0, self.requested.is_set()
            self.requested.set()
        if idle:
            os._exit(TERMINATED)
        if not again:
            threading.Thread(target=self._wind_down, name="converge-stop", daemon=True).start()

    def on_signal(self, signum: int, _frame: FrameType | None) -> None:
        """A signal handler calling :meth:`request`."""
        self.request()

    def _wind_down(self) -> None:
        # cancelled again and again: a run that enters flight after the request
        # (an engine forgets earlier cancels when a run starts) is cancelled too
        deadline = time.monotonic() + self.grace_s
        while time.monotonic() < deadline:
            with self._lock:
                engines, busy = list(self._engines), self._busy
            if not busy:  # the runs stopped: the worker exits, its own way or here
                if self.exit_when_idle:
                    os._exit(TERMINATED)
                return
            for engine in engines:
                engine.cancel()
            time.sleep(RECANCEL_EVERY_S)
        os._exit(TERMINATED)
