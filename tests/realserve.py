"""Real processes for the tests that drive what users run: ``converge serve`` with its
pool (or a broker's workers), and any ``converge`` command as its own process.

- :func:`converge_process`: ``converge ARGS`` started in a new interpreter from the
  repository root, its output to a log file (the caller waits or signals it);
- :func:`served_cli`: ``converge serve --db URL`` on a free port, yielded once it
  listens, stopped (SIGTERM, then kill -9 past 10 s) afterwards;
- :func:`free_port`: a TCP port nobody listens on now;
- :func:`decided_over_http`: a gate decided through a server's API (202 asserted);
- :func:`converge_piped_to_nobody`: ``converge ARGS`` writing to a pipe whose reader is gone;
- :func:`captured`: a command run to its end, its output captured as text;
- :func:`stop_within`: signal a process and take its exit code within 10 s;
- :func:`terminate`: SIGTERM a helper process (Prometheus, Phoenix), kill -9 past a wait.

A command to wait for is :func:`tests.faultfixtures.run_cli`; a store of either kind
is :func:`tests.hitlfixtures.store_url_for`.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

__all__ = [
    "ROOT",
    "STOP_WITHIN_S",
    "Served",
    "captured",
    "converge_piped_to_nobody",
    "converge_process",
    "decided_over_http",
    "free_port",
    "served_cli",
    "stop_within",
    "terminate",
]

ROOT = Path(__file__).resolve().parent.parent
STOP_WITHIN_S = 10.0
"""A server or worker exits within this many seconds of SIGTERM (the team's rule)."""
LISTEN_WITHIN_S = 60.0
"""A ``converge serve`` that does not listen within this long hangs."""


def free_port() -> int:
    """A TCP port of 127.0.0.1 nobody listens on (now)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def converge_process(
    *args: str, log: Path, env: Mapping[str, str] | None = None, errors: Path | None = None
) -> subprocess.Popen[bytes]:
    """``converge ARGS`` in a new interpreter from the repository root, its output
    (stdout and stderr) appended to ``log`` (stderr to ``errors`` when given: its log
    lines apart); ``env`` over this environment."""
    with log.open("ab") as out, (errors or log).open("ab") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "converge.cli", *args],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT if errors is None else err,
            env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        )


def captured(
    command: list[str],
    *,
    cwd: Path = ROOT,
    env: Mapping[str, str] | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """``command`` run in ``cwd`` to its end (``subprocess.TimeoutExpired`` past
    ``timeout`` seconds), ``env`` for its whole environment (this one's by default);
    its exit code and its stdout and stderr as text."""
    return subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def converge_piped_to_nobody(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``converge ARGS | head -1`` once head has gone: every write to stdout fails."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-m", "converge.cli", *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            cwd=cwd,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write_end)


def stop_within(proc: subprocess.Popen[bytes], signum: int, log: Path) -> int:
    """Send ``signum`` to ``proc``; its exit code, which it must give within
    :data:`STOP_WITHIN_S` (AssertionError with its log otherwise, after kill -9)."""
    proc.send_signal(signum)
    try:
        return proc.wait(timeout=STOP_WITHIN_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(
            f"{proc.args} did not stop within {STOP_WITHIN_S} s of signal {signum}:\n"
            + log.read_text(errors="replace")[-4000:]
        ) from None


def terminate(proc: subprocess.Popen[bytes], wait_s: float) -> None:
    """SIGTERM ``proc``, then kill -9 if it has not exited within ``wait_s`` seconds;
    returns once it is gone (no verdict: for processes the test does not judge)."""
    proc.terminate()
    try:
        proc.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def decided_over_http(
    base: str,
    gate_id: str,
    headers: Mapping[str, str],
    decision: dict[str, Any],
    timeout: float = 30,
) -> httpx.Response:
    """``POST BASE/api/gates/GATE_ID/decision`` with ``decision`` (the JSON body, e.g.
    ``{"approved": True}``) and ``headers`` (its bearer token); the answer, which must be
    202 (the decision recorded, the resume queued: AssertionError with its text else)."""
    decided = httpx.post(
        f"{base}/api/gates/{gate_id}/decision", json=decision, headers=headers, timeout=timeout
    )
    assert decided.status_code == 202, decided.text
    return decided


@dataclass(frozen=True)
class Served:
    """A running ``converge serve``: its process, base URL and log file."""

    proc: subprocess.Popen[bytes]
    base: str
    log: Path
    errors: Path | None = None
    """Where its stderr goes, when apart from ``log``."""

    def output(self) -> str:
        """What it printed so far (stdout, then stderr when apart)."""
        text = self.log.read_text(errors="replace")
        if self.errors is not None and self.errors.exists():
            text += self.errors.read_text(errors="replace")
        return text


@contextmanager
def served_cli(
    url: str,
    log: Path,
    *args: str,
    env: Mapping[str, str] | None = None,
    port: int | None = None,
    errors: Path | None = None,
) -> Iterator[Served]:
    """``converge serve --db URL ARGS`` on ``port`` (a free one by default); yields
    it once it listens (its stderr to ``errors`` when given). Afterwards it gets
    SIGTERM (it must exit within 10 s) and is killed if it is still there."""
    port = free_port() if port is None else port
    proc = converge_process(
        "serve", "--db", url, "--port", str(port), *args, log=log, env=env, errors=errors
    )
    served = Served(proc, f"http://127.0.0.1:{port}", log, errors)
    try:
        deadline = time.monotonic() + LISTEN_WITHIN_S
        while "Uvicorn running on" not in served.output():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"converge serve did not start:\n{served.output()[-4000:]}")
            time.sleep(0.05)
        yield served
    finally:
        # killed past 10 s: the test's own assertions say more than this one would
        if proc.poll() is None:
            with suppress(AssertionError):
                stop_within(proc, signal.SIGTERM, log)
