"""Ctrl-C and SIGTERM end a run gracefully: ``UserCancelled``, recorded, checkpointed.

The first SIGINT or SIGTERM asks the engine to cancel its runs in flight: async
suggestors in flight are cut within ``engine._cycle.execution.CANCEL_POLL_S`` (50 ms),
sync ones finish their cycle, and the run stops with ``UserCancelled`` (exit 130),
its facts kept and a checkpoint written, so ``converge resume RUN`` goes on. A
second SIGINT interrupts at once (``KeyboardInterrupt``): the run is then left as
its last committed cycle shows (``crashed``), which ``converge resume`` recovers too.
"""

from __future__ import annotations

import signal
import threading
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

    def on_signal(signum: int, frame: FrameType | None) -> None:
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
