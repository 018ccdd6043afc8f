"""Fault injection for the exactly-once tests: die like ``kill -9`` after the Nth write.

With ``$CONVERGE_FAULT_KILL_AFTER_WRITES=N`` set, the process sends itself SIGKILL
right after its Nth committed write transaction to the audit store (any thread),
so a test can sweep every event boundary of a command deterministically: N = 1, 2,
... until the command finishes before being killed. Unset (the default), this
costs one comparison per write transaction.
"""

from __future__ import annotations

import os
import signal
import threading

__all__ = ["KILL_AFTER_WRITES_ENV", "after_write_commit", "writes_committed"]

KILL_AFTER_WRITES_ENV = "CONVERGE_FAULT_KILL_AFTER_WRITES"
"""The environment variable naming N (a positive integer); read once per process."""

_raw = os.environ.get(KILL_AFTER_WRITES_ENV, "").strip()
_KILL_AFTER = int(_raw) if _raw.isdigit() and int(_raw) > 0 else 0
_lock = threading.Lock()
_count = [0]


def writes_committed() -> int:
    """How many write transactions this process committed to audit stores."""
    return _count[0]


def after_write_commit() -> None:
    """Count one committed write transaction; SIGKILL this process at the Nth."""
    with _lock:
        _count[0] += 1
        if _KILL_AFTER and _count[0] >= _KILL_AFTER:
            os.kill(os.getpid(), signal.SIGKILL)
