"""``converge model serve``'s watch over its model server: :class:`Supervisor`.

The server starts in its own process group with its output in a log file
(:class:`~converge.agents.local.LocalModelServer`). The supervisor waits until it
answers, then until it is stopped or, with a command, until the command exits
(run with ``$CONVERGE_MODEL_BASE_URL`` and ``$CONVERGE_MODEL`` set). A server that
exits meanwhile raises :class:`~converge.errors.ModelServerDied` (how it ended,
its log file, its last lines). A command still running then has ``end_s``
seconds to end by itself: a ``converge run`` whose model call fails on the dead
server stops with ``Error(error_category="external")`` naming the model and the
URL, and exits 5 (stopping it at once would record the run ``user_cancelled``);
its exit code is the error's ``command_code``. A command still running after that
is stopped (``; the command was stopped``). SIGTERM and SIGINT stop the command
and the server (SIGTERM, then SIGKILL after ``grace_s``) before the supervisor
returns ``128 + the signal's number``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from types import FrameType
from typing import Any

from converge.agents.local import LocalModelServer, command_environment

__all__ = ["COMMAND_END_S", "STOP_SIGNALS", "Supervisor"]

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
"""The signals that stop the supervisor, its command and its server."""
COMMAND_END_S = 20.0
"""Seconds a command has to end by itself once its model server died (a model call
on a dead server fails within a few: the OpenAI client's two retries)."""


class Supervisor:
    """Runs ``server`` (and ``command`` once it answers) until one of them ends or
    a stop signal comes (see the module docstring). ``poll_s``: how often the
    processes are looked at; ``grace_s``: how long a process has to end on SIGTERM;
    ``end_s``: how long the command has to end by itself once the server died."""

    def __init__(
        self,
        server: LocalModelServer,
        command: Sequence[str] = (),
        *,
        environ: Mapping[str, str] | None = None,
        poll_s: float = 0.1,
        grace_s: float = 5.0,
        end_s: float = COMMAND_END_S,
    ) -> None:
        self.server = server
        self.command = list(command)
        self.environ = dict(os.environ if environ is None else environ)
        self.poll_s = poll_s
        self.grace_s = grace_s
        self.end_s = end_s
        self.signalled: int | None = None
        self.child: subprocess.Popen[bytes] | None = None

    def run(self, timeout_s: float, on_ready: Callable[[], None] = lambda: None) -> int:
        """Start the server, wait until it answers (at most ``timeout_s``), call
        ``on_ready``, then wait: the command's exit code, or ``128 + N`` after signal
        N. Raises :class:`~converge.errors.ModelServerDied` when the server exits,
        :class:`~engine.ConfigurationError` when it cannot start or answer; the
        server and the command are stopped in every case."""
        previous: dict[signal.Signals, Any] = {}
        if threading.current_thread() is threading.main_thread():  # where handlers go
            previous = {s: signal.signal(s, self._on_signal) for s in STOP_SIGNALS}
        try:
            self.server.start()
            if not self.server.wait_ready(timeout_s, stopping=self._stopping):
                return 128 + (self.signalled or 0)
            on_ready()
            if self.command:
                env = command_environment(self.server, self.environ)
                self.child = subprocess.Popen(self.command, env=env)
            return self._watch()
        finally:
            self._stop_all()
            for s, handler in previous.items():
                signal.signal(s, handler)

    def _watch(self) -> int:
        """Wait for a signal, the server's exit or the command's."""
        while True:
            if self.signalled is not None:
                return 128 + self.signalled
            if self.server.exit_status() is not None:
                raise self._server_died()
            if self.child is not None and self.child.poll() is not None:
                return self.child.returncode
            time.sleep(self.poll_s)

    def _server_died(self) -> Exception:
        """The server is gone: the command (if any) gets :attr:`end_s` seconds to end
        by itself (its model calls fail, typed), then is stopped."""
        if self.child is None:
            return self.server.died()
        deadline = time.monotonic() + self.end_s
        while self.child.poll() is None and time.monotonic() < deadline:
            if self.signalled is not None:
                break
            time.sleep(self.poll_s)
        code = self.child.poll()
        if code is None:
            self._stop_child()
            return self.server.died("; the command was stopped")
        return self.server.died(f"; the command ended with code {code}", command_code=code)

    def _on_signal(self, signum: int, _frame: FrameType | None) -> Any:
        self.signalled = signum

    def _stopping(self) -> bool:
        return self.signalled is not None

    def _child_running(self) -> bool:
        return self.child is not None and self.child.poll() is None

    def _stop_child(self) -> None:
        """SIGTERM to the command, SIGKILL after ``grace_s``."""
        child = self.child
        if child is None or child.poll() is not None:
            return
        child.terminate()
        try:
            child.wait(timeout=self.grace_s)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()

    def _stop_all(self) -> None:
        self._stop_child()
        self.server.stop(self.grace_s)
