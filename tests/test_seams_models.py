"""Where the models meet the rest (issue 53): real processes on both sides.

- A run goes on (approve, reject, resume, the inbox's resume, a replay) with the
  model and base URL it recorded when it started, and refuses another model unless
  asked (``--model``, ``--allow-model-change``), naming both; with its server gone,
  the stop names the model and the URL (items 3; the demo's own path on the real
  Gemma server).
- Under ``converge model serve -- converge run``, a model server killed with -9
  stops the run with ``Error(external)`` naming the model and URL, exit 5 (item 4,
  the real Gemma server).
- One agent used by several engines, each run on its own event loop, reaches the
  server every time (item 5).
- The reviewed audit's reviewer answering ``NOASSERTION`` or a ``LicenseRef-*`` at
  confidence 1.0 waits at a gate (item 7).
- A run recovered after its worker was killed calls no model twice: the cycles
  recorded before the kill are answered from the recorded responses (item 11).

The model servers are real HTTP servers in processes of their own: the stand-in
of tests/fake_model_server.py, which counts its calls (tests/seamsmodels.py), or
the packaged Gemma 3 270M behind llama-cpp-python's server.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from audit import open_store
from audit.store import SqlRunStore
from engine import Budget, Engine, Error
from tests.faultfixtures import run_cli
from tests.hitlfixtures import STORES, store_url_for
from tests.realserve import ROOT
from tests.seamsmodels import clean_model_env, model_server

REVIEWED = ROOT / "examples" / "dependency_audit" / "reviewed.yaml"
PAUSED, DONE, BAD_INPUT, BUDGET, FAILED = 10, 0, 2, 3, 5


def _gates(url: str) -> list[Any]:
    store = open_store(url)
    try:
        return list(store.gates(pending=True))
    finally:
        store.close()


# -- item 5: one agent, several engines, each run on its own event loop ---------------------
def test_one_agent_used_by_several_engines_reaches_the_server_on_every_run(
    tmp_path: Path,
) -> None:
    from converge.agents import build_agent

    with model_server(tmp_path / "model.log", "--digest") as server:
        agent = build_agent(
            name="ticker",
            model=f"openai:{server.alias}",
            base_url=server.url,
            instructions="Answer.",
            reads=["tick"],
            writes="answer",
        )
        for n in range(1, 5):
            engine = Engine(budget=Budget(max_cycles=1))  # a new engine: a new event loop
            engine.register(agent)
            result = engine.run({"tick": [n]})
            assert not isinstance(result.stop_reason, Error), (n, result.stop_reason)
            assert server.calls() == {"received": n, "answered": n}
            [answer] = result.context.get("answer")
            assert str(answer.content).startswith("re-")


# -- item 7: "I don't know" is what a gate is for ----------------------------------------
def _reviewed(url: str, server_url: str) -> Any:
    env = {"CONVERGE_MODEL": "openai:counter", "CONVERGE_MODEL_BASE_URL": server_url}
    return run_cli(["run", str(REVIEWED), "--db", url], env=env)


@pytest.mark.parametrize(
    ("spdx", "kind"),
    [
        ("NOASSERTION", "sqlite"),
        ("NOASSERTION", "postgresql"),
        ("LicenseRef-Left-Pad", "sqlite"),
    ],
)
def test_the_reviewer_not_knowing_at_confidence_1_waits_at_a_gate(
    spdx: str, kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clean_model_env(monkeypatch)
    verdict = json.dumps({"name": "legacy-left-pad", "spdx": spdx, "confidence": 1.0})
    with (
        store_url_for(kind, tmp_path) as url,
        model_server(tmp_path / "model.log", "--answer", verdict) as server,
    ):
        ran = _reviewed(url, server.url)
        assert ran.returncode == PAUSED, ran
        assert server.calls()["answered"] >= 1
        [gate] = _gates(url)
        assert gate.policy == "review:not-spdx"
        assert gate.proposal["content"]["spdx"] == spdx
        assert gate.proposal["confidence"] == 1.0
        assert "which is no known SPDX license expression (confidence 1.0)" in gate.summary


def test_the_reviewer_asserting_a_known_license_at_confidence_1_needs_no_human(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control of the test above: the same run, the same server, an SPDX id."""
    clean_model_env(monkeypatch)
    verdict = json.dumps({"name": "legacy-left-pad", "spdx": "MIT", "confidence": 1.0})
    url = str(tmp_path / "runs.db")
    with model_server(tmp_path / "model.log", "--answer", verdict) as server:
        ran = _reviewed(url, server.url)
        assert ran.returncode == DONE, ran
        assert _gates(url) == []


def _store(url: str) -> SqlRunStore:
    return open_store(url)
