"""Traces in a real trace viewer: `phoenix serve` (Arize Phoenix, extra ``phoenix``)
on free ports of 127.0.0.1 with its own working directory, `converge run --otel`
exporting to it over OTLP/HTTP, and the spans read back through Phoenix's REST
API: one trace per run, executions nested under the run, each agent's model
requests under the agent, the GenAI attributes on the agent spans and the stop
reason on the run span. The agent's model is a scripted OpenAI-compatible server
(tests/fakeopenai.py), so the tokens are known."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from converge.agents.local import free_port
from engine import Context, Proposal, suggestor
from tests.fakeopenai import completion, fake_openai
from tests.realserve import terminate

PHOENIX = Path(sys.executable).parent / "phoenix"


@suggestor(name="collector", dependencies=["topic"])
def collector(ctx: Context) -> list[Proposal]:
    """One note per topic."""
    return [Proposal("note", {"about": f.content}) for f in ctx.get("topic")]


JOB = """\
name: traced
suggestors: [tests.test_phoenix:collector]
agents:
  - name: summariser
    model: openai:small-local
    base_url: {url}
    instructions: Summarise the notes.
    reads: [note]
    writes: summary
    model_settings: {{max_tokens: 64, max_retries: 0}}
budget: {{max_cycles: 5}}
initial:
  topic: [licenses]
"""


@pytest.fixture
def phoenix(tmp_path: Path) -> Iterator[str]:
    """``phoenix serve`` on free ports; its base URL. Stopped at the end."""
    port = free_port()
    env = {
        **os.environ,
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(free_port()),
        "PHOENIX_WORKING_DIR": str(tmp_path / "phoenix"),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    log = (tmp_path / "phoenix.log").open("wb")
    proc = subprocess.Popen([str(PHOENIX), "serve"], env=env, stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: get(f"{url}/healthz") is not None, 180, proc, tmp_path / "phoenix.log")
        yield url
    finally:
        terminate(proc, 20)
        log.close()


def get(url: str) -> Any:
    """The JSON (or text) at ``url``; None when it does not answer 200."""
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            body = r.read().decode()
    except OSError:
        return None
    try:
        return json.loads(body)
    except ValueError:
        return body


def wait_for(ready: Any, timeout_s: float, proc: Any = None, log: Path | None = None) -> None:
    """Poll ``ready()`` until true, at most ``timeout_s`` seconds (a bounded wait on
    another process; fails early when ``proc`` exits)."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        if proc is not None and proc.poll() is not None:
            text = log.read_text()[-3000:] if log else ""
            raise AssertionError(f"phoenix exited with {proc.returncode}: {text}")
        assert time.monotonic() < deadline, f"not ready after {timeout_s}s"
        time.sleep(0.2)


def spans_of(url: str) -> list[dict[str, Any]]:
    """Every span of Phoenix's default project, attributes flattened to dotted keys."""
    data = get(f"{url}/v1/projects/default/spans?limit=1000")
    if not isinstance(data, dict):
        return []
    spans = list(data.get("data") or [])
    for s in spans:
        s["attributes"] = flatten(s.get("attributes") or {})
    return spans


def flatten(attrs: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in attrs.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


def test_a_run_exported_to_phoenix_reads_back_as_one_trace_with_its_gen_ai_attributes(
    phoenix: str, tmp_path: Path
) -> None:
    replies = [completion("Two licenses reviewed.", prompt_tokens=321, completion_tokens=12)]
    with fake_openai(replies) as model:
        job = tmp_path / "job.yaml"
        job.write_text(JOB.format(url=model.url))
        env = {
            **os.environ,
            "OTEL_EXPORTER_OTLP_ENDPOINT": phoenix,
            "CONVERGE_DB": f"sqlite:///{tmp_path / 'runs.db'}",
            "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
        }
        converge = Path(sys.executable).parent / "converge"
        done = subprocess.run(
            [str(converge), "run", str(job), "--otel"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stdout + done.stderr
    wanted = {"invoke_workflow traced", "execute_tool collector", "invoke_agent summariser"}
    wait_for(lambda: wanted <= {s["name"] for s in spans_of(phoenix)}, 60)
    wait_for(lambda: any(s["name"] == "chat small-local" for s in spans_of(phoenix)), 30)
    spans = spans_of(phoenix)
    by_name = {s["name"]: s for s in spans}
    # one trace per run: every span of the run shares the workflow span's trace
    run = by_name["invoke_workflow traced"]
    trace = run["context"]["trace_id"]
    assert {s["context"]["trace_id"] for s in spans} == {trace}
    assert run["parent_id"] is None
    # the cycles' executions under the run, the model request under the agent
    agent = by_name["invoke_agent summariser"]
    for child in ("execute_tool collector", "invoke_agent summariser"):
        assert by_name[child]["parent_id"] == run["context"]["span_id"]
    chat = by_name["chat small-local"]
    assert chat["parent_id"] == agent["context"]["span_id"]
    a = agent["attributes"]
    assert a["gen_ai.operation.name"] == "invoke_agent"
    assert a["gen_ai.agent.name"] == "summariser"
    assert a["gen_ai.request.model"] == "small-local"
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (321, 12)
    assert a["converge.cycle"] == 2
    assert by_name["execute_tool collector"]["attributes"]["converge.cycle"] == 1
    c = chat["attributes"]
    assert c["gen_ai.operation.name"] == "chat"
    assert (c["gen_ai.usage.input_tokens"], c["gen_ai.usage.output_tokens"]) == (321, 12)
    r = run["attributes"]
    assert r["converge.stop_reason"] == "converged"
    assert r["converge.stop_category"] == "success"
    assert r["gen_ai.operation.name"] == "invoke_workflow"
