"""Simulated hosts on this machine, for the lease tests (docs/scale-out.md).

A :class:`Host` is a separate PID and UTS namespace (``unshare --pid --uts --fork
--mount-proc``) with a hostname of its own, running ``converge worker`` against the
test's shared store (a PostgreSQL schema, or one SQLite file) and RabbitMQ. It can
be killed whole (SIGKILL of the namespace's init: the kernel kills every process
in it), frozen (SIGSTOP of every process in it) and thawed (SIGCONT), or started
with its wall clock an hour off (``time.time`` shifted in each of its Python
processes: Debian's libfaketime 0.9.10 makes Python 3.11's timed waits fail with
EINVAL, see :data:`SKEW`). A
:class:`BrokerProxy` stands between the hosts and RabbitMQ: the test drops every
connection through it and brings it back, a broker restart that the machine's
RabbitMQ, shared with other suites, never sees.

Namespaces need root: :func:`hosts_unavailable` says why they cannot be made (the
tests skip, saying so, and fail under CI when they run as root).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

from tests.workerfixtures import BACKEND, BROKER, REPO, pinged

__all__ = ["SKEW", "BrokerProxy", "Host", "hosts_unavailable", "wait_ready"]

UNSHARE = ["unshare", "--pid", "--uts", "--fork", "--mount-proc", "--kill-child"]


def hosts_unavailable() -> str | None:
    """None when this process can make PID and UTS namespaces, else why not."""
    if shutil.which("unshare") is None:
        return "no unshare(1) on this machine (util-linux)"
    if os.geteuid() != 0:
        return "simulated hosts need root (PID and UTS namespaces)"
    done = subprocess.run([*UNSHARE, "hostname", "probe"], capture_output=True, timeout=20)
    if done.returncode != 0:
        return f"unshare failed: {done.stderr.decode(errors='replace').strip()[:200]}"
    return None


SKEW = """import os, time
_off = float(os.environ.get("CONVERGE_TEST_SKEW_S") or 0)
_time, _time_ns = time.time, time.time_ns
time.time = lambda: _time() + _off
time.time_ns = lambda: _time_ns() + int(_off * 1e9)
"""
"""The ``sitecustomize`` of a skewed host: its processes' ``time.time`` is
``$CONVERGE_TEST_SKEW_S`` seconds off. (Under Debian's libfaketime 0.9.10,
``LD_PRELOAD`` or ``faketime(1)``, Python 3.11's ``time.sleep`` and
``threading.Event.wait`` fail with EINVAL, or sleep an hour without
``FAKETIME_DONT_FAKE_MONOTONIC``; and ``faketime(1)`` names its semaphore by its
pid, the same in every PID namespace.)"""


def _ns(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


class Host:
    """One simulated host: ``converge worker`` in its own PID and UTS namespaces,
    hostname ``name``, consuming ``queue`` through ``broker`` over store ``db``, with
    leases of ``lease_s`` seconds; ``skew`` (seconds) puts its processes' wall clock
    that far off (:data:`SKEW`); its output goes to a file in ``logs``."""

    def __init__(
        self,
        name: str,
        *,
        db: str,
        queue: str,
        broker: str,
        lease_s: float,
        skew: float = 0.0,
        logs: Path | None = None,
    ) -> None:
        self.name, self.db, self.queue, self.broker = name, db, queue, broker
        self.lease_s, self.skew = lease_s, skew
        self.node = f"{name}@{queue}"
        self.proc: subprocess.Popen[bytes] | None = None
        folder = logs or Path(os.environ.get("TMPDIR", "/tmp"))
        self.log = folder / f"converge-{queue}-{name}.log"

    def start(self) -> Host:
        """Start the host's worker (returns at once: :meth:`wait_ready`)."""
        worker = [sys.executable, "-m", "converge.cli", "worker", "--broker", self.broker]
        worker += ["--backend", BACKEND, "--queue", self.queue, "--hostname", self.node]
        worker += ["--db", self.db, "--lease-seconds", str(self.lease_s)]
        env = dict(os.environ, PYTHONPATH=REPO, CONVERGE_LEASE_S=str(self.lease_s))
        if self.skew:
            site = self.log.with_suffix(".site")
            site.mkdir(exist_ok=True)
            (site / "sitecustomize.py").write_text(SKEW)
            env.update(PYTHONPATH=f"{site}:{REPO}", CONVERGE_TEST_SKEW_S=str(self.skew))
        script = 'hostname "$0" && exec "$@"'
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [*UNSHARE, "sh", "-c", script, self.name, *worker],
                cwd=REPO,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        return self

    def init_pid(self) -> int | None:
        """The pid (in this namespace) of the host's init: unshare's child."""
        if self.proc is None:
            return None
        try:
            found = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text()
        except OSError:
            return None
        pids = [int(p) for p in found.split()]
        return pids[0] if pids else None

    def pids(self) -> list[int]:
        """Every process of the host (its PID namespace), as this namespace numbers them."""
        init = self.init_pid()
        ns = None if init is None else _ns(init)
        if ns is None:
            return []
        return [int(p) for p in os.listdir("/proc") if p.isdigit() and _ns(int(p)) == ns]

    def kill(self) -> None:
        """The whole host dies: SIGKILL of its init kills every process in it."""
        init = self.init_pid()
        if init is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(init, signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(timeout=20)

    def freeze(self) -> None:
        """SIGSTOP every process of the host (twice: a process forked meanwhile too)."""
        for _ in range(2):
            for pid in self.pids():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGSTOP)

    def thaw(self) -> None:
        """SIGCONT every process of the host."""
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    def stop(self) -> None:
        """End the host (thawed, then killed whole)."""
        self.thaw()
        if self.proc is not None and self.proc.poll() is None:
            self.kill()


def wait_ready(nodes: list[str], timeout: float = 60.0) -> None:
    """Return once every Celery node of ``nodes`` answers a ping (through the real broker)."""
    if not pinged(nodes, timeout):
        raise RuntimeError(f"hosts {nodes} did not start")


class BrokerProxy:
    """A TCP proxy on 127.0.0.1 in front of RabbitMQ: ``url`` is the broker URL the
    hosts use. :meth:`drop` closes every connection and refuses new ones until
    :meth:`restore` (a broker restart, seen from the hosts)."""

    def __init__(self, target: tuple[str, int] = ("127.0.0.1", 5672)) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.url = BROKER.replace(":5672", f":{self.port}")
        self._up = threading.Event()
        self._up.set()
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if not self._up.is_set():
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._open |= {client, upstream}
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()
            with self._lock:
                self._open -= {src, dst}

    def drop(self) -> None:
        """Close every connection through the proxy; refuse new ones."""
        self._up.clear()
        with self._lock:
            live = list(self._open)
        for s in live:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def restore(self) -> None:
        """Accept connections again."""
        self._up.set()

    def close(self) -> None:
        self._closed = True
        self.drop()
        self._listener.close()
