"""Suggestors of the exactly-once jobs (issue 28): a run that pauses at a HITL gate in
cycle 2 and then takes ``steps`` more cycles to converge, and one that never stops
by itself (a budget stops it). Job files reference them as
``tests.exactlyoncejobs:NAME``; :mod:`tests.faultfixtures` writes those files.

Every fact depends only on the facts before it, so an uninterrupted continuation
and a killed-then-recovered one must give the same facts (ids and contents) and
the same facts root.
"""

from __future__ import annotations

from typing import Any

from engine import Context, Proposal, suggestor

PACKAGES = ({"name": "left-pad", "version": "0.3.1"}, {"name": "right-pad", "version": "1.0.0"})
"""What ``scan`` finds in cycle 1."""


@suggestor(name="scan", dependencies=["seed"])
def scan(ctx: Context) -> list[Proposal]:
    """Cycle 1: two packages."""
    return [Proposal("package", dict(p)) for p in PACKAGES]


@suggestor(name="classify", dependencies=["package"])
def classify(ctx: Context) -> list[Proposal]:
    """Cycle 2: the license of left-pad is unknown (the HITL gate holds that proposal);
    the note after it is the rest of the merge the pause checkpoints."""
    return [
        Proposal("license.unknown", dict(PACKAGES[0])),
        Proposal("note", {"classified": [p["name"] for p in PACKAGES]}),
    ]


@suggestor(name="step", dependencies=["license.unknown", "step"])
def step(ctx: Context) -> list[Proposal]:
    """One ``step`` per cycle once the license is known, up to the seed's ``steps``;
    each step carries the license as decided (a human's value shows in every step)."""
    limit = int(ctx.get("seed")[0].content["steps"])
    done = ctx.count("step")
    if done >= limit:
        return []
    return [Proposal("step", {"n": done, "license": ctx.get("license.unknown")[-1].content})]


@suggestor(name="tick")
def tick(ctx: Context) -> list[Proposal]:
    """A new ``n`` every cycle: never converges (its runs stop on a budget)."""
    return [Proposal("n", {"n": ctx.count("n"), "cycle": ctx.cycle})]


def license_value(value: Any, content: Any) -> dict[str, Any]:
    """The gate's ``validate_value`` hook: a human's license answer (``--value MIT``)
    becomes the fact's ``spdx``, marked as coming from a person."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError("a license is a non-empty SPDX id, e.g. MIT")
    if not isinstance(content, dict):
        raise ValueError("the gated proposal has no package")
    return {**content, "spdx": value.strip(), "source": "human"}
