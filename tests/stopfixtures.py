"""Helpers of the stop-condition tests (tests/test_stop_policies*.py): suggestors that
tick, fail or relay, a fake clock, and a run under given stop conditions."""

from __future__ import annotations

from typing import Any

from engine import Budget, Context, Effect, Engine, FunctionSuggestor, Proposal, RunResult, Usage
from gates.policies import policies_from_specs


def ticker(name: str = "tick", key: str = "n", usage: Usage | None = None) -> FunctionSuggestor:
    """Dependency-free: proposes a new number every cycle (never converges)."""

    def run(ctx: Context) -> Effect:
        return Effect([Proposal(key, ctx.count(key))], usage or Usage())

    return FunctionSuggestor(run, name)


def failing(name: str = "flaky", fails: Any = lambda cycle: True) -> FunctionSuggestor:
    """Dependency-free: raises in the cycles where ``fails(cycle)`` is true."""

    def run(ctx: Context) -> Effect:
        if fails(ctx.cycle):
            raise RuntimeError(f"boom in cycle {ctx.cycle}")
        return Effect()

    return FunctionSuggestor(run, name)


def relay(name: str, reads: str, writes: str) -> FunctionSuggestor:
    """Reads the newest fact of ``reads`` and writes its content + 1 to ``writes``."""

    def run(ctx: Context) -> list[Proposal]:
        facts = ctx.get(reads)
        return [Proposal(writes, facts[-1].content + 1)] if facts else []

    return FunctionSuggestor(run, name, dependencies=[reads])


def run_with(
    specs: list[dict[str, Any]],
    *suggestors: FunctionSuggestor,
    budget: Budget | None = None,
    clock: Any = None,
    on_error: Any = "stop",
    initial: dict[str, list[Any]] | None = None,
) -> RunResult:
    """One run of ``suggestors`` under the policies of ``specs`` (50 cycles at most)."""
    engine = Engine(
        budget=budget or Budget(max_cycles=50),
        stop_policies=policies_from_specs(specs),
        on_error=on_error,
        clock=clock,
    )
    engine.register(*suggestors)
    return engine.run(initial)


class FakeClock:
    """A monotonic clock (seconds, from ``now``) that only moves when a test or its
    suggestors advance it."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


# a job file with a loop_detection stop condition and one more: {spec}
JOB = """\
name: policies
suggestors: [tests.jobfixtures:tick]
budget: {{max_cycles: 20}}
stop_conditions:
  - {{type: loop_detection, window: 4}}
  - {spec}
"""
