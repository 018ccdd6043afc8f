"""Whether the process that writes a run is alive: the (pid, hostname) a run row records.

A run whose writer ran on this host and is gone is ``crashed``; a writer on another
host is taken as alive (its lease is the store's to judge).
"""

from __future__ import annotations

import os
import socket

__all__ = ["this_writer", "writer_alive"]

_HOST = socket.gethostname()


def writer_alive(pid: int | None, hostname: str | None) -> bool:
    """False only when the writer ran on this host and its pid no longer exists."""
    if pid is None or hostname != _HOST:
        return True
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """True when ``pid`` exited and is not reaped yet (Linux ``/proc``; False elsewhere):
    a worker killed with its parent stays a zombie until init reaps it, while its
    run's message is already redelivered."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return False
    end = stat.rfind(b")")  # the command name, in parentheses, may hold anything
    return stat[end + 2 : end + 3] == b"Z"


def this_writer() -> tuple[int, str]:
    """(pid, hostname) of this process, recorded on the runs it writes."""
    return os.getpid(), _HOST
