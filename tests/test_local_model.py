"""The real local model (extra ``local``): the packaged Gemma 3 270M behind
llama-cpp-python's server on a free port of 127.0.0.1, started by ``converge model
serve`` and answering a chat completion on this machine's CPU. A job's agents run on it
through ``model: openai:NAME`` and a base URL, the run ends with a typed stop, and
the tokens recorded for each agent call are those the server billed (its
``usage``, read by a recording proxy in front of it). Under CI the extra is there
and the test runs; elsewhere it is skipped without the extra."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from audit import open_store
from converge.agents.local import MODEL_ALIAS, SERVER_ENV, LocalModelServer, local_server
from converge.cli import app
from engine.stop_categories import EXIT_CODES
from tests.fakeopenai import fake_openai
from tests.realserve import captured

if importlib.util.find_spec("llama_cpp") is None and not os.environ.get("CI"):
    pytest.skip("needs the 'local' extra (llama-cpp-python)", allow_module_level=True)

MIT = (
    Path(__file__).resolve().parents[1] / "examples/dependency_audit/vendor/legacy-left-pad/LICENSE"
).read_text()

AGENT = """\
  - name: {name}
    model: openai:{model}
    base_url: {url}
    instructions: >-
      {instructions}
    reads: [{reads}]
    writes: {writes}
    output: examples.dependency_audit.reviewer:LicenseVerdict
    model_settings: {{max_tokens: 96, temperature: 0}}
"""

INSTRUCTIONS = {
    "first_reviewer": "You review software licenses. Name the package, the SPDX id of its "
    "license and your confidence between 0 and 1.",
    "second_reviewer": "You are a second license reviewer. Give the package name, the SPDX "
    "identifier of the license text and a confidence from 0 to 1.",
}


def job_text(url: str) -> str:
    agents = "".join(
        AGENT.format(
            name=name,
            model=MODEL_ALIAS,
            url=url,
            instructions=text,
            reads=f"file.{i}",
            writes=f"license.{i}",
        )
        for i, (name, text) in enumerate(INSTRUCTIONS.items())
    )
    return (
        "name: local-review\n"
        "suggestors: [examples.dependency_audit.reviewer:reviewer_decisions]\n"
        f"agents:\n{agents}"
        "budget: {max_cycles: 3, max_seconds: 600}\n"
        "initial:\n"
        f"  file.0: [{{name: left-pad, text: {MIT!r}}}]\n"
        f"  file.1: [{{name: right-pad, text: {MIT!r}}}]\n"
    )


def test_a_job_on_the_real_local_model_records_exactly_the_servers_usage_for_each_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("CONVERGE_MODEL", "CONVERGE_MODEL_BASE_URL", "OPENAI_API_KEY", SERVER_ENV):
        monkeypatch.delenv(name, raising=False)
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    job = tmp_path / "job.yaml"
    with local_server(0) as server, fake_openai(upstream=server.base_url) as proxy:
        job.write_text(job_text(proxy.url))
        outcome = CliRunner().invoke(app, ["run", str(job), "--db", db, "--json"])
    assert server.process is not None and server.process.poll() is not None  # stopped
    # a typed stop (a 270M model may answer badly: that ends typed too)
    assert outcome.exit_code in EXIT_CODES.values(), outcome.output
    assert outcome.exception is None or isinstance(outcome.exception, SystemExit)
    store = open_store(db)
    run = store.runs()[0]
    assert run.stop_reason is not None
    # what each agent's executions returned, and what failed or cut ones recorded
    kinds = ["suggestor_executed", "usage_recorded"]
    executions = [e.payload for e in store.events(run.run_id, kinds)]
    recorded: dict[str, list[int]] = {}
    for e in executions:
        if e["suggestor"] in INSTRUCTIONS:
            tokens = recorded.setdefault(e["suggestor"], [0, 0])
            tokens[0] += e["usage"][0]
            tokens[1] += e["usage"][1]
    # what the server billed, request by request, told apart by the agent's instructions
    billed: dict[str, list[int]] = {}
    for body, usage in zip(proxy.requests, proxy.usages, strict=True):
        if not usage:  # an HTTP error bills nothing
            continue
        agent = who_asked(body)
        tokens = billed.setdefault(agent, [0, 0])
        tokens[0] += usage["prompt_tokens"]
        tokens[1] += usage["completion_tokens"]
    assert set(billed) == set(INSTRUCTIONS)
    assert recorded == billed
    total = [sum(t[0] for t in billed.values()), sum(t[1] for t in billed.values())]
    assert [run.usage.input_tokens, run.usage.output_tokens] == total


def who_asked(body: dict[str, Any]) -> str:
    """The agent whose instructions open this request's messages."""
    system = next(m["content"] for m in body["messages"] if m["role"] == "system")
    return next(name for name, text in INSTRUCTIONS.items() if text in system)


PROBE = """\
import json, os, sys, urllib.request
url = os.environ["CONVERGE_MODEL_BASE_URL"]
with urllib.request.urlopen(url + "/models", timeout=30) as r:
    models = [m["id"] for m in json.load(r)["data"]]
print(json.dumps({"url": url, "model": os.environ["CONVERGE_MODEL"], "served": models}))
sys.exit(7)
"""


def _served_to(
    monkeypatch: pytest.MonkeyPatch, script: str, timeout: float
) -> subprocess.CompletedProcess[str]:
    """``converge model serve --port 0 -- python -c SCRIPT`` run to its end (no model
    nor server named by this environment), its output captured."""
    for name in ("CONVERGE_MODEL", SERVER_ENV):
        monkeypatch.delenv(name, raising=False)
    converge = Path(sys.executable).parent / "converge"
    serve = [str(converge), "model", "serve", "--port", "0", "--", sys.executable, "-c", script]
    return captured(serve, cwd=Path.cwd(), timeout=timeout)


def test_converge_model_serve_runs_a_command_against_the_server_then_stops_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    done = _served_to(monkeypatch, PROBE, 300)
    assert done.returncode == 7, done.stdout + done.stderr  # the command's exit code
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["url"].startswith("http://127.0.0.1:") and seen["url"].endswith("/v1")
    assert seen["model"] == f"openai:{MODEL_ALIAS}"
    assert seen["served"] == [MODEL_ALIAS]
    # the server is gone: nothing answers on its port any more
    with pytest.raises(OSError):
        urllib.request.urlopen(seen["url"] + "/models", timeout=5)


CHAT = """\
import json, os, urllib.request
body = {
    "model": os.environ["CONVERGE_MODEL"].split(":", 1)[1],
    "messages": [{"role": "user", "content": "Say hello in one word."}],
    "max_tokens": 16,
    "temperature": 0,
}
url = os.environ["CONVERGE_MODEL_BASE_URL"] + "/chat/completions"
request = urllib.request.Request(
    url, json.dumps(body).encode(), {"Content-Type": "application/json"}
)
with urllib.request.urlopen(request, timeout=300) as r:
    print(json.dumps(json.load(r)))
"""


def test_converge_model_serve_starts_the_packaged_model_and_it_answers_a_chat_completion(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # the packaged GGUF on llama-cpp-python as installed, whatever CPU this is
    # (llama.cpp's AMX path faulted on the first request here: issue 41)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    done = _served_to(monkeypatch, CHAT, 600)
    assert done.returncode == 0, done.stdout + done.stderr
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert answer["model"] == MODEL_ALIAS
    message = answer["choices"][0]["message"]
    assert message["role"] == "assistant" and message["content"].strip()
    assert answer["usage"]["completion_tokens"] > 0
    # the server's output went to the log file it names
    assert list((tmp_path / "converge").glob("model-server-*.log"))


def test_the_server_is_llama_cpp_on_loopback_with_the_assembled_gemma_and_its_chat_format() -> None:
    cmd = LocalModelServer(8123, environ={}).command()
    # llama_cpp.server, with llama.cpp's extra buffer types off (any x86-64 CPU)
    assert cmd[1:3] == ["-m", "converge.agents.llama_server"]
    flags = dict(zip(cmd[3::2], cmd[4::2], strict=True))
    assert flags["--chat_format"] == "gemma"  # the GGUF has no chat template
    assert flags["--host"] == "127.0.0.1" and flags["--port"] == "8123"
    assert flags["--model_alias"] == MODEL_ALIAS
    model = Path(flags["--model"])
    assert model.name == "gemma-3-270m-q4_k_m.gguf" and model.stat().st_size > 200_000_000


def test_the_server_turns_llama_cpps_extra_buffer_types_off() -> None:
    # their AMX path faults on a CPU the library was not built on (issue 41)
    from converge.agents.llama_server import portable_params

    class Params:
        use_extra_bufts = True
        use_mmap = True

    made = portable_params(Params)()
    assert made.use_extra_bufts is False and made.use_mmap is True


def test_the_llama_cpp_make_installs_is_built_for_any_cpu_with_avx2() -> None:
    # make's portable build (issue 41): no AVX-512 or AMX kernels, which fault or are
    # illegal on another x86-64 CPU; a build made by a plain pip install is native
    if not os.environ.get("CI"):
        pytest.skip("checks the build `make test` installs (run under CI)")
    llama_cpp = pytest.importorskip("llama_cpp")
    features = llama_cpp.llama_print_system_info().decode()
    assert "AVX2 = 1" in features, features
    assert "AVX512" not in features and "AMX" not in features, features
