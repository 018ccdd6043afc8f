"""Determinism: same suggestors, same inputs → same facts, ids, order and provenance.

Whatever order concurrent suggestors finish in (DESIGN.md §1, §4 step 5).
"""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine import Budget, Context, Effect, Engine, Proposal, RunResult


def _snapshot(r: RunResult) -> list[tuple[Any, ...]]:
    return [(f.id, f.key, f.content, f.confidence, f.provenance) for f in r.context]


class Node:
    """A suggestor of a random job: reads ``deps``, writes ``key`` (sum of what it read).

    ``yields`` > 0 makes it ``async``: it awaits that many times before answering, so
    async nodes finish in an order unrelated to their registration order.
    """

    def __init__(self, index: int, deps: list[str], key: str, yields: int, extra: bool) -> None:
        self.name = f"node{index}"
        self.index = index
        self.dependencies = frozenset(deps)
        self.key = key
        self.yields = yields
        self.extra = extra
        self.is_async = yields > 0

    def accepts(self, ctx: Context) -> bool:
        return True

    def _propose(self, ctx: Context) -> Effect:
        read = [f for d in sorted(self.dependencies) for f in ctx.get(d)]
        total = sum(f.content for f in read) + self.index
        props = [Proposal(self.key, total % 97, parents=tuple(f.id for f in read[-2:]))]
        if self.extra:
            props.append(Proposal(self.key, (total * 7) % 97, confidence=0.5))
        return Effect(props)

    def execute(self, ctx: Context) -> Any:
        if not self.is_async:
            return self._propose(ctx)

        async def later() -> Effect:
            for _ in range(self.yields):
                await asyncio.sleep(0)
            return self._propose(ctx)

        return later()


@st.composite
def jobs(draw: st.DrawFn, *, single_writer: bool) -> list[tuple[list[str], str, int, bool]]:
    """A random DAG: node i reads keys written by earlier nodes (or the input key)."""
    n = draw(st.integers(1, 6))
    specs: list[tuple[list[str], str, int, bool]] = []
    for i in range(n):
        available = ["in"] + [f"k{j}" for j in range(i)]
        deps = draw(st.lists(st.sampled_from(available), max_size=3, unique=True))
        key = f"k{i}" if single_writer else draw(st.sampled_from([f"k{i}", "shared"]))
        specs.append((deps, key, draw(st.integers(0, 3)), draw(st.booleans())))
    return specs


def _run(specs: list[tuple[list[str], str, int, bool]], order: list[int], sync: bool) -> RunResult:
    engine = Engine(budget=Budget(max_cycles=40))
    for i in order:
        deps, key, yields, extra = specs[i]
        engine.register(Node(i, deps, key, 0 if sync else yields, extra))
    return engine.run({"in": [1, 2]}, run_id="same")


@settings(max_examples=50, deadline=None)
@given(jobs(single_writer=False), st.randoms(use_true_random=False))
def test_same_job_twice_gives_the_same_facts_ids_order_and_provenance(
    specs: list[tuple[list[str], str, int, bool]], rnd: Any
) -> None:
    order = list(range(len(specs)))
    rnd.shuffle(order)
    first, second = _run(specs, order, sync=False), _run(specs, order, sync=False)
    assert _snapshot(first) == _snapshot(second)
    assert first.stop_reason == second.stop_reason and first.cycles == second.cycles
    assert first.facts_root == second.facts_root


@settings(max_examples=50, deadline=None)
@given(jobs(single_writer=False), st.randoms(use_true_random=False))
def test_async_completion_order_does_not_change_the_result(
    specs: list[tuple[list[str], str, int, bool]], rnd: Any
) -> None:
    order = list(range(len(specs)))
    rnd.shuffle(order)
    assert _snapshot(_run(specs, order, sync=False)) == _snapshot(_run(specs, order, sync=True))


@settings(max_examples=50, deadline=None)
@given(jobs(single_writer=True), st.randoms(use_true_random=False))
def test_with_one_writer_per_key_each_keys_facts_do_not_depend_on_registration_order(
    specs: list[tuple[list[str], str, int, bool]], rnd: Any
) -> None:
    order = list(range(len(specs)))
    shuffled = order[:]
    rnd.shuffle(shuffled)

    def by_id(r: RunResult) -> dict[str, tuple[Any, ...]]:
        # the proposal id names the merge slot, which follows registration order
        return {
            f.id: (f.content, f.provenance.suggestor, f.provenance.cycle, f.provenance.parents)
            for f in r.context
        }

    a, b = _run(specs, order, sync=False), _run(specs, shuffled, sync=False)
    assert by_id(a) == by_id(b)
    assert a.stop_reason == b.stop_reason and a.cycles == b.cycles


def test_async_suggestors_finishing_in_reverse_order_merge_in_registration_order() -> None:
    finished: list[str] = []

    def make(i: int, delay: float) -> Any:
        class Slow:
            name = f"s{i}"
            dependencies = frozenset({"go"})

            def accepts(self, ctx: Context) -> bool:
                return True

            async def execute(self, ctx: Context) -> list[Proposal]:
                await asyncio.sleep(delay)
                finished.append(self.name)
                return [Proposal("out", i), Proposal(f"own{i}", i)]

        return Slow()

    def run(delays: list[float]) -> RunResult:
        engine = Engine()
        engine.register(*(make(i, d) for i, d in enumerate(delays)))
        return engine.run({"go": [True]}, run_id="same")

    decreasing = run([0.04, 0.03, 0.02, 0.01, 0.0])
    assert finished == ["s4", "s3", "s2", "s1", "s0"]
    finished.clear()
    increasing = run([0.0, 0.01, 0.02, 0.03, 0.04])
    assert finished == ["s0", "s1", "s2", "s3", "s4"]
    assert _snapshot(decreasing) == _snapshot(increasing)
    assert [(f.id, f.provenance.suggestor) for f in decreasing.context.get("out")] == [
        (f"out#{i}", f"s{i}") for i in range(5)
    ]
    assert [f.provenance.proposal_id for f in decreasing.context.get("out")] == [
        f"s{i}/1/{i}.0" for i in range(5)
    ]


@settings(max_examples=200, deadline=None)
@given(n=st.integers(0, 600), cut=st.integers(0, 600))
def test_the_incremental_merkle_root_equals_the_whole_tree_across_a_checkpoint(
    n: int, cut: int
) -> None:
    import hashlib

    from engine.hashing.merkle import MerkleFrontier, root_of_leaves

    leaves = [hashlib.sha256(str(i).encode()).digest() for i in range(n)]
    before = MerkleFrontier()
    before.extend(leaves[: min(cut, n)])
    after = MerkleFrontier.from_json(before.to_json())  # as a checkpoint carries it
    after.extend(leaves[min(cut, n) :])
    assert after.root() == root_of_leaves(leaves)
    assert after.count == n
