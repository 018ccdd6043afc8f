"""The W4 benchmark's workloads run and do the same work (tiny sizes, no latency)."""

from __future__ import annotations

from benchmarks.agents_bench import (
    build_agent_fanout,
    build_langgraph_fanout,
    build_raw_fanout,
)
from engine import CycleBudgetExhausted, RunResult


def test_the_converge_fan_out_runs_every_agent_in_every_cycle() -> None:
    result = build_agent_fanout(n=3, cycles=2, latency_s=0.0)()()
    assert isinstance(result, RunResult)
    assert isinstance(result.stop_reason, CycleBudgetExhausted)
    assert result.usage.input_tokens == 50 * 3 * 2  # 3 agents x 2 cycles, 50 tokens each


def test_the_raw_and_langgraph_fan_outs_make_the_same_number_of_agent_calls() -> None:
    build_raw_fanout(n=3, cycles=2, latency_s=0.0)()()
    out = build_langgraph_fanout(n=3, cycles=2, latency_s=0.0)()()
    assert isinstance(out, dict) and len(out["answers"]) == 3 * 2
