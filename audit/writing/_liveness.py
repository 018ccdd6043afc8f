"""Whether the process that writes a run is alive: the (pid, hostname) a run row
records, and the holder id of its lease (``host/pid/start``, :func:`holder_id`).

A run whose writer ran on this host and is gone is ``crashed`` at once (the fast
path); a writer on another host is judged by its lease, in the store, by the
database's clock (:mod:`audit.writing._lease`). The process start time in a holder id
tells a live process from a later one that reuses its pid.
"""

from __future__ import annotations

import os
import socket

__all__ = ["holder_alive", "holder_id", "this_writer", "writer_alive"]

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


def _start_ticks(pid: int) -> str | None:
    """The start time of process ``pid`` (clock ticks after boot, Linux ``/proc``), or
    None when it cannot be read (no such process, no ``/proc``)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()
    return fields[19].decode() if len(fields) > 19 else None


def holder_id() -> str:
    """``host/pid/start`` of this process: the holder of the leases it takes (its
    start time in clock ticks after boot, ``0`` where ``/proc`` is missing)."""
    pid = os.getpid()
    return f"{_HOST}/{pid}/{_start_ticks(pid) or 0}"


def holder_alive(holder: str) -> bool:
    """False only when ``holder`` (a :func:`holder_id`) ran on this host and that
    process is gone: its pid no longer exists, is a zombie, or belongs to a process
    started at another time. A holder on another host is alive (its lease says)."""
    parts = holder.rsplit("/", 2)
    if len(parts) != 3 or not parts[1].isdigit():
        return True
    host, pid_text, start = parts
    if host != _HOST:
        return True
    pid = int(pid_text)
    if not writer_alive(pid, host):
        return False
    now = _start_ticks(pid)
    return start == "0" or now is None or now == start


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
