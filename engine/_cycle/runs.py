"""The runs an engine holds in memory: in flight, cancelled, paused, stopped.

An engine keeps its paused and resumable runs so that ``resume`` and
``resume_run`` work in the same process with no store; ``cancel`` is thread-safe.
"""

from __future__ import annotations

import threading

from engine._cycle.run import Run


class RunTable:
    """The in-memory state of an engine's runs, keyed by run id or gate id.

    ``active``: run ids in flight; ``cancelled``: run ids asked to stop;
    ``paused``: gate id → the run waiting on it; ``stopped``: run id → a run that
    stopped resumably; ``decided``: gate id → (status, by, epoch seconds) of gates
    decided in this process without a store (so a second decision is refused).
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.active: set[str] = set()
        self.cancelled: set[str] = set()
        self.paused: dict[str, Run] = {}
        self.stopped: dict[str, Run] = {}
        self.decided: dict[str, tuple[str, str, float]] = {}

    def cancel(self, run_id: str | None) -> None:
        """Mark ``run_id`` cancelled; None: every run in flight (not later ones)."""
        with self.lock:
            if run_id is None:
                self.cancelled.update(self.active)
            else:
                self.cancelled.add(run_id)

    def enter(self, run_id: str, *, clear_cancel: bool = False) -> None:
        """A run goes (back) into flight; ``clear_cancel`` forgets an earlier cancel."""
        with self.lock:
            if clear_cancel:
                self.cancelled.discard(run_id)
            self.active.add(run_id)

    def leave(self, run_id: str) -> None:
        """A run is no longer in flight (stopped or paused)."""
        with self.lock:
            self.active.discard(run_id)
