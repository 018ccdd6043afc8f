"""Suggestors of the run-service tests (issue 22): runs whose cycles take a little
time, so that a worker can be killed or a run cancelled in the middle of one.

Job files reference them as ``tests.servicejobs:NAME`` (the workers import them
from the repository root); :mod:`tests.servicefixtures` writes those files. The
seed fact says how many cycles and how long each takes: ``{"steps": N,
"sleep_ms": M}``. Every fact depends only on the facts before it, so a run killed
and recovered gives the same facts (ids and contents) as one left alone.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from engine import Context, Proposal, suggestor

RELEASE = threading.Event()
"""What :func:`held` waits for: the test sets it once it has its HTTP answer."""
HELD = threading.Event()
"""Set by :func:`held` when it starts waiting (the run's leg is under way)."""
HOLD_TIMEOUT_S = 60.0


def _beats(ctx: Context, after: str | None) -> list[Proposal]:
    seed = ctx.get("seed")[0].content
    done = ctx.count("beat")
    if done >= int(seed["steps"]):
        return []
    time.sleep(float(seed.get("sleep_ms", 0)) / 1000)
    since: Any = None if after is None else ctx.get(after)[-1].content
    return [Proposal("beat", {"n": done, "after": since})]


@suggestor(name="beat", dependencies=["seed", "beat"])
def beat(ctx: Context) -> list[Proposal]:
    """One ``beat`` a cycle, each after ``sleep_ms`` of work, up to the seed's ``steps``."""
    return _beats(ctx, None)


@suggestor(name="gated_beat", dependencies=["license.unknown", "beat"])
def gated_beat(ctx: Context) -> list[Proposal]:
    """Like :func:`beat`, once the gated license is known (after its approval):
    each beat carries the license as decided."""
    return _beats(ctx, "license.unknown")


@suggestor(name="held", dependencies=["license.unknown"])
def held(ctx: Context) -> list[Proposal]:
    """After the approval: waits until the test sets :data:`RELEASE` (a slow leg)."""
    HELD.set()
    if not RELEASE.wait(HOLD_TIMEOUT_S):
        raise TimeoutError("the test never released the held leg")
    return [Proposal("released", ctx.get("license.unknown")[-1].content)]
