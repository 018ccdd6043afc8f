"""``converge model serve`` supervises its server: a server that dies makes it exit
non-zero naming how the server ended, its log file and its last lines (also with
a command after ``--``, which is stopped unless it ends by itself: then its exit
code is the exit); SIGTERM and SIGINT stop the server with
it, leaving nothing on the port. The server here is a stand-in
(tests/fake_model_server.py, through ``$CONVERGE_MODEL_SERVER``), so that these
run in seconds; tests/test_local_model.py runs the real one."""

from __future__ import annotations

import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from converge.agents.local import SERVER_ENV, LocalModelServer, exit_status
from converge.cli.model import SERVER_DIED
from converge.errors import ModelServerDied
from tests.fake_model_server import COMMAND

ROOT = Path(__file__).resolve().parents[1]
CONVERGE = Path(sys.executable).parent / "converge"
SERVING = re.compile(r"serving \S+ at http://127\.0\.0\.1:(\d+)/v1 \(pid (\d+);")


def serve(tmp_path: Path, *args: str, server: str = COMMAND) -> subprocess.Popen[str]:
    """``converge model serve --port 0 ARGS`` on the stand-in server, its log under
    ``tmp_path``."""
    env = {**os.environ, SERVER_ENV: server, "XDG_CACHE_HOME": str(tmp_path)}
    env.pop("CONVERGE_MODEL", None)
    return subprocess.Popen(
        [str(CONVERGE), "model", "serve", "--port", "0", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def announced(proc: subprocess.Popen[str], timeout_s: float = 60.0) -> tuple[int, int]:
    """The port and the server's pid ``converge model serve`` announces."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    seen = ""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.5)
        if ready:
            line = proc.stdout.readline()
            seen += line
            found = SERVING.search(line)
            if found:
                return int(found.group(1)), int(found.group(2))
            if not line and proc.poll() is not None:
                break
    raise AssertionError(f"no announcement: {seen!r}, stderr: {proc.stderr and proc.stderr.read()}")


def gone(pid: int) -> bool:
    """True when no process ``pid`` runs (a zombie counts as gone)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def port_free(port: int) -> bool:
    """True when nothing listens on 127.0.0.1:``port``."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            s.listen(1)
        except OSError:
            return False
    return True


def wait_for(proc: subprocess.Popen[str], timeout_s: float = 10.0) -> tuple[str, str]:
    """``proc``'s output once it exits (at most ``timeout_s`` seconds)."""
    out, err = proc.communicate(timeout=timeout_s)
    return out, err


def _serving(tmp_path: Path) -> tuple[subprocess.Popen[str], int, int]:
    """``converge model serve`` on the stand-in, running no command: the process, once
    it announced them, with the port and the server's pid."""
    proc = serve(tmp_path)
    return (proc, *announced(proc))


@pytest.mark.parametrize("sig", [signal.SIGSEGV, signal.SIGKILL])
def test_a_server_that_dies_makes_serve_exit_naming_the_signal_the_log_and_its_last_lines(
    tmp_path: Path, sig: signal.Signals
) -> None:
    proc, port, pid = _serving(tmp_path)
    os.kill(pid, sig)
    out, err = wait_for(proc)
    assert proc.returncode == SERVER_DIED, out + err
    log = tmp_path / "converge" / f"model-server-{port}.log"
    text = " ".join(err.split())  # the message, however the terminal wraps it
    assert f"model server died: killed by {sig.name}" in text
    assert str(log) in text
    # its last lines, from the log file it names
    assert f"fake: pid {pid} serving gemma3-270m on port {port}" in err
    assert "GET /v1/models" in log.read_text()


def test_with_a_command_a_dying_server_stops_the_command_and_exits_naming_it(
    tmp_path: Path,
) -> None:
    # the server faults on its first chat request; the command would wait a minute
    command = (
        "import os, urllib.request\n"
        "url = os.environ['CONVERGE_MODEL_BASE_URL'] + '/chat/completions'\n"
        "try:\n"
        "    urllib.request.urlopen(urllib.request.Request(url, b'{}'), timeout=30)\n"
        "except OSError as exc:\n"
        "    print('request failed:', exc, flush=True)\n"
        "import time; time.sleep(60)\n"
    )
    crash = COMMAND + " --crash-on-chat"
    # the command has 2 s to end by itself, then it is stopped
    proc = serve(tmp_path, "--end-within", "2", "--", sys.executable, "-c", command, server=crash)
    out, err = wait_for(proc, 30)
    assert proc.returncode == SERVER_DIED, out + err
    text = " ".join(err.split())
    assert "model server died: killed by SIGSEGV; the command was stopped" in text
    assert "model-server-" in text and "fake: about to fault" in err


def test_with_a_command_that_ends_by_itself_after_the_server_died_its_code_is_the_exit(
    tmp_path: Path,
) -> None:
    """As a ``converge run`` whose model call fails on the dead server: it stops (typed)
    and exits with its stop's code; the server's death is said too."""
    command = (
        "import os, sys, urllib.request\n"
        "url = os.environ['CONVERGE_MODEL_BASE_URL'] + '/chat/completions'\n"
        "try:\n"
        "    urllib.request.urlopen(urllib.request.Request(url, b'{}'), timeout=30)\n"
        "except OSError as exc:\n"
        "    print('request failed:', exc, flush=True)\n"
        "    sys.exit(7)\n"
    )
    proc = serve(tmp_path, "--", sys.executable, "-c", command, server=COMMAND + " --crash-on-chat")
    out, err = wait_for(proc, 30)
    assert proc.returncode == 7, out + err
    assert "request failed" in out
    text = " ".join(err.split())
    assert "model server died: killed by SIGSEGV; the command ended with code 7" in text


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_stops_serve_and_its_server_leaving_the_port_free(
    tmp_path: Path, sig: signal.Signals
) -> None:
    proc, port, pid = _serving(tmp_path)
    assert not port_free(port) and not gone(pid)
    proc.send_signal(sig)
    wait_for(proc, 10)
    assert proc.returncode == 128 + sig
    deadline = time.monotonic() + 10
    while not gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gone(pid)
    assert port_free(port)


def test_a_stop_signal_with_a_command_stops_the_command_and_the_server(tmp_path: Path) -> None:
    marker = tmp_path / "command.pid"
    command = f"import os, time; open({str(marker)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    proc = serve(tmp_path, "--", sys.executable, "-c", command)
    deadline = time.monotonic() + 60
    while not (marker.exists() and marker.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    child = int(marker.read_text())
    server = next(p for p in psutil.Process(proc.pid).children() if p.pid != child)
    proc.send_signal(signal.SIGTERM)
    wait_for(proc, 10)
    assert proc.returncode == 128 + signal.SIGTERM
    assert gone(child) and gone(server.pid)


def test_a_server_that_exits_before_answering_is_reported_with_its_log(tmp_path: Path) -> None:
    script = "import sys; print('x' * 1000); print('no model here'); sys.exit(3)"
    server = LocalModelServer(
        0, log_dir=tmp_path, environ={SERVER_ENV: f'{sys.executable} -c "{script}"'}
    )
    server.start()
    with pytest.raises(ModelServerDied) as caught:
        server.wait_ready(30)
    server.stop()
    message = str(caught.value)
    assert message.startswith(f"model server died: exited with code 3 (its log: {server.log_path})")
    assert message.endswith("\n  no model here")
    assert "  " + "x" * 237 + "...\n" in message  # a long line, cut


def test_how_a_process_ended_reads_as_a_signal_or_an_exit_code() -> None:
    assert exit_status(-11) == "killed by SIGSEGV"
    assert exit_status(-9) == "killed by SIGKILL"
    assert exit_status(2) == "exited with code 2"
