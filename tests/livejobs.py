"""A job whose cycles the test releases one by one: a run to watch while it runs.

``tick`` proposes the next tick each cycle, after taking one permit of
:data:`STEPS` (the test gives permits with ``STEPS.release(n)``), up to
``LAST`` ticks; then the run reaches its fixed point. The permits are files that
the test and the worker processes of its ``LocalRunPool`` share, so the test
decides when each cycle ends wherever the run executes.
"""

from __future__ import annotations

from converge.jobs import Job, parse_job
from engine import Context, Proposal, suggestor
from tests.servicejobs import FilePermits

STEPS = FilePermits("ticks")
LAST = 6
WAIT_S = 60.0
"""Longest a cycle waits for its permit (seconds): a test that fails never hangs."""

JOB = """\
name: ticker
suggestors: [tests.livejobs:tick]
budget: {max_cycles: 50}
initial: {seed: [0]}
"""


@suggestor(name="tick", dependencies=["seed", "tick"])
def tick(ctx: Context) -> list[Proposal]:
    """One more tick per permit, up to :data:`LAST`."""
    done = ctx.count("tick")
    if done >= LAST:
        return []
    if not STEPS.acquire(timeout=WAIT_S):
        raise TimeoutError("the test gave no permit for the next cycle")
    return [Proposal("tick", done + 1)]


def ticker_job() -> Job:
    """The job above, parsed (its modules import from the repository root)."""
    return parse_job(JOB, "ticker.yaml")
