"""Suggestors that return what canonical JSON cannot hold, or raise what they should
not: the same typed stop with and without a store, the facts before it kept, the
run recorded as stopped and its chain intact (issue: reliability, item 2)."""

from __future__ import annotations

import asyncio
import math
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from audit import SqlRunStore, open_store
from engine import (
    AgentRefused,
    Context,
    Effect,
    Engine,
    Error,
    ErrorCategory,
    FunctionSuggestor,
    Proposal,
    RunResult,
    StopRequested,
    StopRun,
    Usage,
)
from tests.strategies import json_trees, nested_dicts


class Boom(BaseException):
    """A BaseException that is neither KeyboardInterrupt nor SystemExit."""


def _nested(levels: int) -> Any:
    root: list[Any] = []
    cur = root
    for _ in range(levels):
        nxt: list[Any] = []
        cur.append(nxt)
        cur = nxt
    return root


def _generator() -> Iterator[Proposal]:
    yield Proposal("late", 1)


BAD_OUTPUTS: dict[str, Callable[[], Any]] = {
    "NaN inside a dict": lambda: [Proposal("bad", {"x": math.nan})],
    "infinity inside a list": lambda: [Proposal("bad", [1, math.inf])],
    "a lone surrogate": lambda: [Proposal("bad", "\ud800")],
    "a lone surrogate in a key": lambda: [Proposal("bad", {"\udc00": 1})],
    "an integer of 5,000 digits": lambda: [Proposal("bad", 10**5000)],
    "a dict with a huge integer": lambda: [Proposal("bad", {"n": 10**5000})],
    "nesting 3,000 deep": lambda: [Proposal("bad", _nested(3000))],
    "parents that are not strings": lambda: [Proposal("bad", 1, parents=(1, 2))],  # type: ignore[arg-type]
    "parents=None": lambda: [Proposal("bad", 1, parents=None)],  # type: ignore[arg-type]
    "an id that is not a string": lambda: [Proposal("bad", 1, id=5)],  # type: ignore[arg-type]
    "an Effect holding a generator": lambda: Effect(_generator()),  # type: ignore[arg-type]
    "a NaN usage cost": lambda: Effect([], Usage(1, 1, math.nan)),
    "negative tokens": lambda: Effect([], Usage(-1, 0, 0.0)),
    "a refusal with a lone surrogate": lambda: Effect.refuse("\ud800"),
    "a StopRun 300 levels deep": lambda: _raise(StopRun("deep", context=nested_dicts(300))),
    "a StopRun 3,000 levels deep": lambda: _raise(StopRun("deep", context=nested_dicts(3000))),
    "a BaseException": lambda: _raise(Boom("not an Exception")),
    "an exception whose str() fails": lambda: _raise(_Unprintable()),
}


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no")


def _raise(exc: BaseException) -> Any:
    raise exc


def _engine(bad: Callable[[], Any], store: SqlRunStore | None) -> Engine:
    """Cycle 1 promotes a good fact; cycle 2 returns (or raises) the bad output."""

    def step(ctx: Context) -> Any:
        return [Proposal("good", "kept")] if ctx.cycle == 1 else bad()

    return Engine(store=store).register(FunctionSuggestor(step, "chaos"))


def _same(a: RunResult, b: RunResult) -> None:
    assert a.stop_reason == b.stop_reason
    assert [f for f in a.context] == [f for f in b.context]


@pytest.mark.parametrize("name", list(BAD_OUTPUTS))
def test_bad_output_is_the_same_typed_stop_with_and_without_a_store(
    name: str, tmp_path: Path
) -> None:
    bad = BAD_OUTPUTS[name]
    plain = _engine(bad, None).run()
    store = open_store(str(tmp_path / "audit.db"))
    stored = _engine(bad, store).run(run_id="chaos")
    _same(plain, stored)
    reason = plain.stop_reason
    assert isinstance(reason, Error | StopRequested | AgentRefused)
    if isinstance(reason, Error):
        assert reason.error_category == ErrorCategory.SUGGESTOR
        assert "chaos" in reason.message and "<" not in reason.message.split(":")[0]
    assert plain.context.get("good")[0].content == "kept"
    row = store.run("chaos")
    assert row.status == "stopped" and row.kind == reason.kind_code()
    assert store.verify("chaos").ok
    # every reason that was recorded reads back as it was returned
    assert row.stop_reason == reason


def test_a_base_exception_from_accepts_is_a_typed_stop() -> None:
    def refuse(ctx: Context) -> bool:
        raise Boom("accepts")

    s = FunctionSuggestor(lambda ctx: [Proposal("x", 1)], "picky", accepts=refuse)
    result = Engine().register(s).run()
    assert isinstance(result.stop_reason, Error)
    assert "Boom: accepts" in result.stop_reason.message


def test_a_base_exception_from_a_sync_suggestor_beside_an_async_one_is_a_typed_stop() -> None:
    async def fine(ctx: Context) -> list[Proposal]:
        await asyncio.sleep(0)
        return [Proposal("a", 1)]

    def broken(ctx: Context) -> list[Proposal]:
        raise Boom("sync beside async")

    engine = Engine().register(FunctionSuggestor(fine, "fine"), FunctionSuggestor(broken, "b"))
    result = engine.run()
    assert isinstance(result.stop_reason, Error)
    assert result.stop_reason.message == "b: Boom: sync beside async"
    assert "not done" not in result.stop_reason.message


def test_a_base_exception_from_an_async_suggestor_is_a_typed_stop() -> None:
    async def broken(ctx: Context) -> list[Proposal]:
        raise Boom("async")

    result = Engine().register(FunctionSuggestor(broken, "b")).run()
    assert isinstance(result.stop_reason, Error)
    assert result.stop_reason.message == "b: Boom: async"


json_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(),
    st.integers(1, 3).map(lambda n: n * 10**4001),  # too many digits for JSON
    st.just("\ud800"),
)
contents = json_trees(json_leaves, key_size=3, max_leaves=8)
odd = st.one_of(
    st.just(None), st.integers(), st.text(), st.tuples(st.integers()), st.just(object())
)
outputs = st.one_of(
    st.lists(st.builds(Proposal, st.text(max_size=3), contents), max_size=3),
    st.builds(
        Proposal,
        st.one_of(st.text(max_size=3), odd),
        contents,
        st.one_of(st.floats(), st.integers()),
        st.one_of(st.tuples(st.text(max_size=2)), odd),
        st.one_of(st.none(), st.text(max_size=2), odd),
    ).map(lambda p: [p]),
    st.builds(Effect, st.lists(st.builds(Proposal, st.text(max_size=2), contents), max_size=2)),
    st.builds(
        Effect,
        st.just([]),
        st.builds(Usage, st.integers(), st.integers(), st.floats()),
        st.one_of(st.none(), st.text(), odd),
    ),
    odd,
    contents,
)


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(output=outputs)
def test_fuzzed_suggestor_output_is_a_typed_stop_and_never_leaves_the_run_running(
    output: Any, tmp_path: Path
) -> None:
    store = open_store(str(tmp_path / "fuzz.db"))
    run_id = f"fuzz-{uuid.uuid4().hex}"  # tmp_path is shared by the examples
    result = _engine(lambda: output, store).run(run_id=run_id)
    assert result.stop_reason is not None
    assert result.context.get("good")[0].content == "kept"
    row = store.run(run_id)
    assert row.status == "stopped"
    assert row.stop_reason == result.stop_reason
    assert store.verify(run_id).ok
