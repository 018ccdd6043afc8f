"""The W4 benchmark's workloads run and do the same work (tiny sizes, no latency);
its real-model row says why when the local model is unavailable."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from benchmarks.agents_bench import (
    build_agent_fanout,
    build_langgraph_fanout,
    build_raw_fanout,
    run_w4_local,
)
from benchmarks.session import QUICK, Suite
from converge.agents.local import SERVER_ENV
from engine import CycleBudgetExhausted, RunResult
from tests.fake_model_server import COMMAND


def test_the_converge_fan_out_runs_every_agent_in_every_cycle() -> None:
    result = build_agent_fanout(n=3, cycles=2, latency_s=0.0)()()
    assert isinstance(result, RunResult)
    assert isinstance(result.stop_reason, CycleBudgetExhausted)
    assert result.usage.input_tokens == 50 * 3 * 2  # 3 agents x 2 cycles, 50 tokens each


def test_the_raw_and_langgraph_fan_outs_make_the_same_number_of_agent_calls() -> None:
    build_raw_fanout(n=3, cycles=2, latency_s=0.0)()()
    out = build_langgraph_fanout(n=3, cycles=2, latency_s=0.0)()()
    assert isinstance(out, dict) and len(out["answers"]) == 3 * 2


@pytest.mark.parametrize(
    ("server", "why"),
    [
        # a server that cannot load its model exits before it answers
        (
            f"{sys.executable} -c \"print('error loading model'); raise SystemExit(1)\"",
            "exited with code 1",
        ),
        # one that faults on the first request, as llama.cpp's AMX path did (issue 41)
        (COMMAND + " --crash-on-chat", "killed by SIGSEGV"),
    ],
)
def test_the_local_model_row_says_why_the_model_is_unavailable_never_a_traceback(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    server: str,
    why: str,
) -> None:
    monkeypatch.setenv(SERVER_ENV, server)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    for name in ("CONVERGE_MODEL", "CONVERGE_MODEL_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    suite = Suite(QUICK, workdir=str(tmp_path))
    run_w4_local(suite)
    (row,) = suite.rows
    assert row.workload == "W4 local model call" and row.ours is None
    log = tmp_path / "converge"
    assert row.note.startswith(f"model unavailable: model server died: {why} (its log: {log}/")
    err = capsys.readouterr().err
    assert "W4 local model: model unavailable: model server died" in err
    assert "Traceback" not in err
