"""The garbage collector stays out of a large merge (engine/_cycle/merge.py's ``Merge``).

The facts a merge builds all survive it, so a collection in the middle of one walks
the growing context to free nothing: R1 (benchmarks/resume_bench.py) paused up to
228 ms inside the merge that promotes its 100k facts. A merge of many proposals
runs with automatic collection off, and turns it back on after, also when it stops.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine import Budget, Engine, Proposal
from engine._cycle.collector import FREEZE_AFTER_FACTS
from engine.context import Context
from engine.facts import Fact
from engine.suggestor import FunctionSuggestor
from gates.hitl import require_approval
from gates.promotion import promotion_gate

MERGE_FILE = str(Path(__file__).resolve().parent.parent / "engine" / "_cycle" / "merge.py")


@pytest.fixture
def collections_in_merge() -> Iterator[list[int]]:
    """The generations of the automatic collections that start inside the merge step,
    with thresholds low enough that a merge of thousands of facts would see many."""
    seen: list[int] = []

    def callback(phase: str, info: dict[str, Any]) -> None:
        if phase != "start":
            return
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_filename == MERGE_FILE:
                seen.append(int(info["generation"]))
                return
            frame = frame.f_back  # type: ignore[assignment]

    thresholds = gc.get_threshold()
    was_enabled = gc.isenabled()
    gc.enable()
    gc.set_threshold(100, 2, 2)
    gc.callbacks.append(callback)
    try:
        yield seen
    finally:
        gc.callbacks.remove(callback)
        gc.set_threshold(*thresholds)
        if not was_enabled:
            gc.disable()


def _engine(n: int, reject: int | None = None) -> Engine:
    def bulk(ctx: Context) -> list[Proposal]:
        return [] if ctx.has("data") else [Proposal("data", i) for i in range(n)]

    @promotion_gate(name="not-this-one")
    def refuse(proposal: Proposal, suggestor: str, ctx: Context) -> str | None:
        return "refused" if proposal.content == reject else None

    # a HITL policy on another key keeps the run on the general cycle (finish_merge)
    engine = Engine(
        budget=Budget(max_cycles=5, max_facts=0),
        gates=[refuse, require_approval(keys=["other"])],
    )
    engine.register(FunctionSuggestor(bulk, "bulk", ()))
    return engine


def test_a_merge_of_many_proposals_sees_no_automatic_collection(
    collections_in_merge: list[int],
) -> None:
    result = _engine(4 * FREEZE_AFTER_FACTS).run()
    assert result.stop_reason.is_success(), result.stop_reason
    assert len(result.context) == 4 * FREEZE_AFTER_FACTS
    assert collections_in_merge == []
    assert gc.isenabled()


def test_a_small_merge_leaves_the_collector_as_it_is(collections_in_merge: list[int]) -> None:
    # a few hundred container objects per fact would be needed to trigger one here, so
    # make small merges allocate: 1,000 facts of dict content
    def small(ctx: Context) -> list[Proposal]:
        return [] if ctx.has("d") else [Proposal("d", {"i": i, "l": [i]}) for i in range(1000)]

    engine = Engine(budget=Budget(max_cycles=5), gates=[require_approval(keys=["other"])])
    engine.register(FunctionSuggestor(small, "small", ()))
    engine.run()
    # below the threshold the merge runs with the collector on, as before
    assert collections_in_merge != []


def test_the_collector_is_back_on_after_a_large_merge_that_stops_the_run() -> None:
    result = _engine(2 * FREEZE_AFTER_FACTS, reject=FREEZE_AFTER_FACTS).run()
    assert result.stop_reason.kind == "promotion_rejected", result.stop_reason
    assert len(result.context) == FREEZE_AFTER_FACTS  # partial results are kept
    assert gc.isenabled()


def test_a_large_merge_freezes_its_facts_without_scanning_them() -> None:
    # scanning each new fact in the young generation, then again in the next, was a
    # sixth of an audited merge's time (W2): the merge freezes what it built instead
    frozen_in_cycle_2: list[int] = []
    facts_scanned: list[int] = []

    def bulk(ctx: Context) -> list[Proposal]:
        if ctx.has("frozen-data"):
            frozen_in_cycle_2.append(gc.get_freeze_count())
            return []
        return [Proposal("frozen-data", i) for i in range(2 * FREEZE_AFTER_FACTS)]

    def callback(phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and info["generation"] < 2:
            young = gc.get_objects(0) + gc.get_objects(1)
            # this run's facts only: other tests of the process leave facts of their own
            facts_scanned.append(
                sum(1 for o in young if type(o) is Fact and o.key == "frozen-data")
            )

    engine = Engine(budget=Budget(max_cycles=5, max_facts=0), gates=[require_approval(keys=["x"])])
    engine.register(FunctionSuggestor(bulk, "bulk", ()))
    assert gc.get_freeze_count() == 0
    gc.callbacks.append(callback)
    try:
        result = engine.run()
    finally:
        gc.callbacks.remove(callback)
    assert result.stop_reason.is_success(), result.stop_reason
    # the facts (a tuple and its provenance each) were frozen by the end of the merge
    assert frozen_in_cycle_2 and frozen_in_cycle_2[0] >= 2 * 2 * FREEZE_AFTER_FACTS
    # no young collection walked them (before, two did: the young generation once
    # the collector was back on, then the next, before the freeze)
    assert not any(facts_scanned), facts_scanned
    assert gc.get_freeze_count() == 0  # given back when the run returned
