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

import contextlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from audit import open_store
from audit.people import add_token
from audit.run_queue import queue_run
from audit.store import SqlRunStore
from converge.jobs import load_job
from engine import Budget, Engine, Error, RunHeader, new_run_id
from tests.faultfixtures import differences, run_cli, snapshot
from tests.hitlfixtures import STORES, store_url_for
from tests.realserve import ROOT, converge_process, free_port, served_cli
from tests.seamsmodels import ModelServer, clean_model_env, model_server, ticking_job
from tests.servicefixtures import state, stopped, until

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


# -- item 3: a run goes on with the model it recorded --------------------------------------
def _header(url: str, run_id: str) -> Any:
    store = open_store(url)
    try:
        return store.get_run_header(run_id)
    finally:
        store.close()


def _stop(url: str, run_id: str) -> dict[str, Any]:
    store = open_store(url)
    try:
        [event] = store.events(run_id, kinds=("run_stopped",))[-1:]
        reason: dict[str, Any] = event.payload["reason"]
        return reason
    finally:
        store.close()


def _models_called(url: str, run_id: str) -> list[str]:
    """The model each agent execution of the run names, in order."""
    store = open_store(url)
    try:
        return [e.payload["model"] for e in store.events(run_id, kinds=("suggestor_executed",))]
    finally:
        store.close()


@contextlib.contextmanager
def _paused_on_the_counter(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, max_cycles: int
) -> Iterator[tuple[str, Any, ModelServer]]:
    """A gated :func:`ticking_job` of ``max_cycles`` run by ``converge run`` in a store of
    ``kind`` on the ``--digest`` stand-in's ``openai:counter`` (named by the environment
    of that command alone), paused at its one gate: yields the store's URL, the gate's
    row and the model server (killed after)."""
    clean_model_env(monkeypatch)
    job = ticking_job(tmp_path / "ticking.yaml", max_cycles=max_cycles, gated=True)
    with (
        store_url_for(kind, tmp_path) as url,
        model_server(tmp_path / "model.log", "--digest") as server,
    ):
        env = {"CONVERGE_MODEL": "openai:counter", "CONVERGE_MODEL_BASE_URL": server.url}
        ran = run_cli(["run", str(job), "--db", url], env=env)
        assert ran.returncode == PAUSED, ran
        [gate] = _gates(url)
        yield url, gate, server


@pytest.mark.parametrize("kind", STORES)
def test_a_run_goes_on_with_the_model_and_base_url_it_recorded(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _paused_on_the_counter(kind, tmp_path, monkeypatch, 4) as (url, gate, server):
        run_id = gate.run_id
        assert server.calls()["answered"] == 2
        # recorded with the run, in its chained header: the model and the URL, no key
        recorded = _header(url, run_id).job_spec
        assert recorded["models"] == {"ticker": {"model": "openai:counter", "base_url": server.url}}
        assert "not-needed" not in json.dumps(recorded)

        # another model in the environment: refused, naming both, nothing recorded
        refused = run_cli(
            ["approve", gate.gate_id, "--by", "alice", "--db", url], env={"CONVERGE_MODEL": "test"}
        )
        assert refused.returncode == BAD_INPUT, refused
        assert "openai:counter" in refused.message and "asks for test" in refused.message
        assert [g.gate_id for g in _gates(url)] == [gate.gate_id]

        # none in the environment: the recorded model, at the recorded URL
        approved = run_cli(["approve", gate.gate_id, "--by", "alice", "--db", url])
        assert approved.returncode == BUDGET, approved
        assert server.calls()["answered"] == 4
        # replayed with no model set: from the recorded responses, no call
        replayed = run_cli(["replay", run_id, "--db", url])
        assert replayed.returncode == 0, replayed
        assert server.calls()["answered"] == 4

        # resumed on another model only when asked: --model
        more = ["resume", run_id, "--db", url, "--max-cycles", "5"]
        refused = run_cli(more, env={"CONVERGE_MODEL": "test"})
        assert refused.returncode == BAD_INPUT, refused
        assert "openai:counter" in refused.message and "asks for test" in refused.message
        assert run_cli([*more, "--model", "test"]).returncode == BUDGET
        assert server.calls()["answered"] == 4  # the offline TestModel answered cycle 5
        assert _models_called(url, run_id)[-2:] == ["openai:counter", "test:test"]

        # the recorded server gone: the stop names the model and its URL
        server.stop()
        gone = run_cli(["resume", run_id, "--db", url, "--max-cycles", "6"])
        assert gone.returncode == FAILED, gone
        reason = _stop(url, run_id)
        assert (reason["kind"], reason["error_category"]) == ("error", "external"), reason
        assert "openai:counter" in reason["message"] and server.url in reason["message"]


@pytest.mark.parametrize("kind", STORES)
def test_the_inboxs_resume_goes_on_with_the_recorded_model(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _paused_on_the_counter(kind, tmp_path, monkeypatch, 3) as (url, gate, server):
        store = open_store(url)
        try:
            auth = {"Authorization": f"Bearer {add_token(store, 'alice')}"}
            decision = f"/api/gates/{gate.gate_id}/decision"
            body = {"approved": True, "reason": "fine"}
            # a server whose environment names another model: refused, naming both
            with served_cli(url, tmp_path / "serve1.log", env={"CONVERGE_MODEL": "test"}) as served:
                refused = httpx.post(served.base + decision, json=body, headers=auth, timeout=60)
            assert refused.status_code == 409, refused.text
            assert "openai:counter" in refused.text and "asks for test" in refused.text
            assert [g.gate_id for g in _gates(url)] == [gate.gate_id]
            # one whose environment names none: its pool resumes on the recorded model
            log = tmp_path / "serve2.log"
            with served_cli(url, log) as served:
                approved = httpx.post(served.base + decision, json=body, headers=auth, timeout=60)
                assert approved.status_code == 202, approved.text
                row = stopped(store, gate.run_id)
            assert row.kind == "cycle_budget_exhausted", (row, log.read_text()[-3000:])
            assert server.calls()["answered"] == 3
        finally:
            store.close()


# -- item 11: a recovery calls no model twice ------------------------------------------------
CYCLES, KILLED_IN = 20, 9
"""The agent run's cycles, and the cycle whose model call the kill cuts (8 committed)."""


def _queued(job_file: Path, url: str) -> str:
    """The run of ``job_file`` recorded ``queued`` (as ``converge submit`` records it)."""
    store = open_store(url)
    try:
        run_id = new_run_id()
        job = load_job(job_file)
        queue_run(store, RunHeader(run_id, job.name, job.record(), (), 0.0))
        return run_id
    finally:
        store.close()


@pytest.mark.parametrize("kind", STORES)
def test_a_worker_killed_mid_run_is_recovered_without_calling_the_model_twice(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clean_model_env(monkeypatch)
    hold = CYCLES + KILLED_IN  # the reference's calls come first
    with (
        store_url_for(kind, tmp_path) as url,
        model_server(tmp_path / "model.log", "--digest", "--hold-at", str(hold)) as server,
    ):
        model = {"model": f"openai:{server.alias}", "base_url": server.url}
        job = ticking_job(tmp_path / "ticking.yaml", max_cycles=CYCLES, **model)
        # the reference: a worker runs it uninterrupted
        reference = _queued(job, url)
        ran = run_cli(["worker", "--run", reference, "--db", url])
        assert ran.returncode == BUDGET, ran
        assert server.calls() == {"received": CYCLES, "answered": CYCLES}
        want = snapshot(url, reference)

        run_id = _queued(job, url)
        log = tmp_path / "worker.log"
        worker = converge_process(
            "worker", "--run", run_id, "--db", url, "--lease-seconds", "2", log=log
        )
        store = open_store(url)
        try:
            # killed -9 while its model call of cycle 9 is in flight (8 cycles committed)
            until(lambda: server.calls()["received"] == hold, what=lambda: log.read_text())
            until(lambda: store.run(run_id).cycles == KILLED_IN - 1, what=state(store, run_id))
            worker.kill()
            worker.wait()
            until(lambda: store.run(run_id).status == "crashed", what=state(store, run_id))
        finally:
            store.close()
        # another worker recovers it: the 8 recorded cycles from their recorded responses
        recovered = run_cli(["worker", "--run", run_id, "--db", url])
        assert recovered.returncode == BUDGET, recovered
        calls = server.calls()
        # one model call per cycle, as the reference's; the call the kill cut made again
        assert calls["answered"] - CYCLES == CYCLES, calls
        assert calls["received"] - CYCLES == CYCLES + 1, calls
        assert differences(snapshot(url, run_id), want) == []


# -- the real local model: make demo-llm's command -------------------------------------------
gemma = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None and not os.environ.get("CI"),
    reason="needs the 'local' extra (llama-cpp-python): under CI it must be there",
)
CONVERGE = str(Path(sys.executable).parent / "converge")
DEMO_LLM = ["model", "serve", "--port", "0", "--", CONVERGE, "run", str(REVIEWED)]
"""make demo-llm's command (Makefile), the store given with --db."""
NEXT = re.compile(r"next: converge approve (\S+) --by NAME")


def _converge(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``converge ARGS`` from the repository's root, in this environment."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [CONVERGE, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


@gemma
def test_the_llm_demos_printed_next_step_goes_on_with_the_model_it_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from converge.agents.local import LocalModelServer

    clean_model_env(monkeypatch)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # the servers' logs
    url = str(tmp_path / "demo.db")
    demo = _converge(*DEMO_LLM, "--db", url)
    assert demo.returncode == PAUSED, demo.stdout + demo.stderr
    found = NEXT.search(demo.stdout)
    assert found is not None, demo.stdout
    gate_id = found.group(1)
    [gate] = _gates(url)
    assert gate.gate_id == gate_id and gate.suggestor == "license_reviewer"
    recorded = _header(url, gate.run_id).job_spec["models"]["license_reviewer"]
    assert recorded["model"] == "openai:gemma3-270m"
    base = recorded["base_url"]
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v1", base), recorded

    approve = ["approve", gate_id, "--by", "alice", "--db", url]
    # $CONVERGE_MODEL=test: refused, naming both models; nothing recorded
    monkeypatch.setenv("CONVERGE_MODEL", "test")
    refused = _converge(*approve)
    assert refused.returncode == BAD_INPUT, refused.stderr
    said = " ".join(refused.stderr.split())
    assert "openai:gemma3-270m" in said and "asks for test" in said, said
    assert [g.gate_id for g in _gates(url)] == [gate_id]
    # ... unless asked for (on a copy of the store: the gate stays for the next step)
    copy = str(tmp_path / "copy.db")
    shutil.copyfile(url, copy)
    changed = _converge(*approve[:-1], copy, "--allow-model-change")
    assert changed.returncode in (DONE, 4), changed.stdout + changed.stderr
    monkeypatch.delenv("CONVERGE_MODEL")

    # the printed next step, in an environment naming no model, a server at the
    # recorded URL: the run reaches its stop
    port = int(base.rsplit(":", 1)[1].split("/")[0])
    server = LocalModelServer(port, log_dir=tmp_path)
    server.start()
    try:
        assert server.wait_ready(120)
        approved = _converge(*approve)
    finally:
        server.stop()
    assert approved.returncode in (DONE, 4), approved.stdout + approved.stderr
    assert "resumed run" in approved.stderr
    reason = _stop(url, gate.run_id)
    assert reason["kind"] in ("criteria_met", "criteria_unmet"), reason
    # and it replays with no model set
    replayed = _converge("replay", gate.run_id, "--db", url)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr


def _server_of(supervisor: subprocess.Popen[bytes]) -> psutil.Process | None:
    """The model server ``converge model serve`` (``supervisor``) started, once it runs."""
    with contextlib.suppress(psutil.NoSuchProcess):
        for child in psutil.Process(supervisor.pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if "converge.agents.llama_server" in " ".join(child.cmdline()):
                    return child
    return None


@gemma
def test_the_model_server_killed_under_model_serve_stops_the_run_naming_model_and_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clean_model_env(monkeypatch)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    url, port = str(tmp_path / "demo.db"), free_port()
    demo = [*DEMO_LLM[:3], str(port), *DEMO_LLM[4:], "--db", url]
    out, err = tmp_path / "serve.out", tmp_path / "serve.err"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        proc = subprocess.Popen(
            [CONVERGE, *demo],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=stdout,
            stderr=stderr,
        )
    try:
        server = until(lambda: _server_of(proc), timeout=120)
        log = tmp_path / "converge" / f"model-server-{port}.log"
        # the second listing is the run's, just before its agent's chat request
        until(lambda: log.read_text(errors="replace").count("GET /v1/models") >= 2, timeout=300)
        server.kill()  # kill -9
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    said = " ".join(err.read_text().split())
    assert code == FAILED, said
    assert "model server died: killed by SIGKILL; the command ended with code 5" in said
    store = open_store(url)
    try:
        [run] = store.runs(limit=2)
        run_id = run.run_id
    finally:
        store.close()
    reason = _stop(url, run_id)
    assert (reason["kind"], reason["error_category"]) == ("error", "external"), reason
    assert "openai:gemma3-270m" in reason["message"], reason
    assert f"http://127.0.0.1:{port}/v1" in reason["message"], reason
