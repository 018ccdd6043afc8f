"""What tests/test_seams_models.py starts and runs: a model server that counts its
calls, as its own process on 127.0.0.1 (tests/fake_model_server.py), and job files
of agents calling a model.

- :func:`model_server`: ``python -m tests.fake_model_server`` on a free port (or the
  one given), yielded once ``GET /v1/models`` answers; :meth:`ModelServer.calls`
  reads its counts (chat requests ``received`` and ``answered``);
- :func:`ticking_job`: one agent, ``ticker``, reading and writing ``tick``: one
  model call a cycle, each answer new (the server's ``--digest``), to ``max_cycles``;
  with ``gated``, a HITL gate on the tick of cycle 2 (:func:`at_cycle_2`);
- :func:`clean_model_env`: the variables a model is chosen by, removed from the
  environment of the test (and so of the commands it starts).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from converge.agents.local import answering
from engine import Context, Proposal, suggestor
from tests.realserve import ROOT, free_port

__all__ = [
    "MODEL_VARIABLES",
    "ModelServer",
    "at_cycle_2",
    "clean_model_env",
    "idle",
    "model_server",
    "ticking_job",
]

MODEL_VARIABLES = (
    "CONVERGE_MODEL",
    "CONVERGE_MODEL_BASE_URL",
    "CONVERGE_MODEL_SERVER",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
)
"""What chooses an agent's model and server: none is set for the commands of these tests
unless the test says so."""
READY_WITHIN_S = 30.0


def clean_model_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Remove :data:`MODEL_VARIABLES` from this process's environment (the commands
    started by ``run_cli`` and ``converge_process`` inherit it)."""
    for name in MODEL_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@dataclass
class ModelServer:
    """A running stand-in model server: its process, port, model name and log file."""

    proc: subprocess.Popen[bytes]
    port: int
    alias: str
    log: Path

    @property
    def url(self) -> str:
        """Its base URL, ``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def calls(self) -> dict[str, int]:
        """``{"received": R, "answered": A}``: the chat requests it received and answered."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/calls", timeout=10) as r:
            data: dict[str, int] = json.loads(r.read())
            return data

    def answering(self) -> bool:
        """Whether it answers ``GET /v1/models`` (:func:`converge.agents.local.answering`)."""
        return answering(self.url)

    def stop(self) -> None:
        """Kill it (nothing of it is worth a graceful end) and wait for it."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@contextmanager
def model_server(
    log: Path, *args: str, alias: str = "counter", port: int | None = None
) -> Iterator[ModelServer]:
    """``python -m tests.fake_model_server --model_alias ALIAS ARGS`` on ``port`` (a
    free one by default), its output in ``log``; yielded once it answers, killed
    afterwards."""
    port = free_port() if port is None else port
    command = [sys.executable, "-m", "tests.fake_model_server", "--model_alias", alias]
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [*command, "--port", str(port), *args],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    server = ModelServer(proc, port, alias, log)
    try:
        deadline = time.monotonic() + READY_WITHIN_S
        while not server.answering():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the model server did not start: {log.read_text()}")
            time.sleep(0.05)
        yield server
    finally:
        server.stop()


@suggestor(name="idle", dependencies=["never"])
def idle(ctx: Context) -> list[Proposal]:
    """A job file names one suggestor at least: this one, which never runs."""
    return []


def at_cycle_2(proposal: Proposal, ctx: Context) -> bool:
    """The ``when`` of :func:`ticking_job`'s gate: the tick proposed in cycle 2."""
    return ctx.cycle == 2


def ticking_job(
    path: Path,
    *,
    max_cycles: int,
    gated: bool = False,
    model: str | None = None,
    base_url: str | None = None,
) -> Path:
    """The job file of one agent ticking once a cycle (see the module docstring);
    ``model`` and ``base_url`` in its entry when given (else ``$CONVERGE_MODEL``,
    ``$CONVERGE_MODEL_BASE_URL``)."""
    agent: dict[str, Any] = {
        "name": "ticker",
        "instructions": "Answer with the next tick.",
        "reads": ["tick"],
        "writes": "tick",
        "model_settings": {"max_tokens": 16, "temperature": 0},
    }
    if model is not None:
        agent["model"] = model
    if base_url is not None:
        agent["base_url"] = base_url
    job: dict[str, Any] = {
        "name": "seams-ticking",
        "suggestors": ["tests.seamsmodels:idle"],
        "agents": [agent],
        "budget": {"max_cycles": max_cycles},
        "initial": {"tick": ["start"]},
    }
    if gated:
        job["gates"] = [
            {
                "hitl": {
                    "keys": ["tick"],
                    "when": "tests.seamsmodels:at_cycle_2",
                    "summary": "Tick {content}?",
                }
            }
        ]
    path.write_text(json.dumps(job, indent=2))  # JSON is YAML
    return path
