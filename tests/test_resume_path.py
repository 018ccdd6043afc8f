"""A resume followed through the code stays short (issue 30, docs/architecture.md).

A reader follows ``Engine.resume`` of a run paused at a gate, loaded from its store
by another engine, to the resumed run's stop: every function of the engine's code
entered on the way, each counted once (a *stay*), in the order first entered; and
each time that path moves to a module it had already left (a *return*). Calls the
store makes back into the engine (its hashing) and a suggestor's own calls are not
on the path. Before the run was split into owned parts and the cycle into steps
(issue 30), this path took 64 stays in 20 modules and came back 23 times (98 and
78 when the issue was filed, counted by hand); issue 30's bounds are 40 and 15.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

from audit.store import open_store
from engine import Context, Engine, GateDecision, Proposal, suggestor
from gates import require_approval
from tests.pathcounting import code, describe, returns_of

ENGINE_DIR = str(Path(__file__).resolve().parent.parent / "engine") + "/"
PARTS = ("_cycle/cursor.py", "_cycle/spend.py", "_cycle/run_parts.py")
"""The modules of the run's parts: their verbs and properties are not stays."""
MAX_STAYS = 47
MAX_RETURNS = 12


@suggestor(name="scan", dependencies=["seed"])
def scan(ctx: Context) -> list[Proposal]:
    return [Proposal("package", "a"), Proposal("license.unknown", {"name": "b"})]


@suggestor(name="count", dependencies=["license.unknown", "package"])
def count(ctx: Context) -> list[Proposal]:
    return [Proposal("summary", {"packages": ctx.count("package")})]


def engine_of(store: Any) -> Engine:
    gate = require_approval(keys=["license.unknown"], summary="Classify {content[name]}")
    return Engine(gates=[gate], store=store).register(scan, count)


def resume_path(tmp_path: Path) -> tuple[list[CodeType], Any]:
    """The engine functions a resume enters, in first-entry order, and its result."""
    store = open_store(str(tmp_path / "audit.db"))
    paused = engine_of(store).run({"seed": [1]})
    gate_id = paused.stop_reason.gate_id  # type: ignore[union-attr]
    other = engine_of(store)  # as another process would: from the store
    stays: dict[CodeType, None] = {}

    def follow(frame: FrameType, event: str, arg: object) -> None:
        code = frame.f_code
        if event != "call" or not code.co_filename.startswith(ENGINE_DIR):
            return
        caller = frame.f_back
        on_path = caller is not None and caller.f_code.co_filename.startswith(ENGINE_DIR)
        if code.co_filename.endswith(PARTS):
            return  # a part's verb or property: read at its call, as an attribute
        if (on_path or code.co_name == "resume") and not code.co_name.startswith("<"):
            stays.setdefault(code, None)  # comprehensions and lambdas are not stays

    sys.setprofile(follow)
    try:
        result = other.resume(gate_id, GateDecision.approve(by="alice"))
    finally:
        sys.setprofile(None)
        store.close()
    return list(stays), result


def test_a_resume_passes_through_no_more_functions_and_returns_than_today(tmp_path: Path) -> None:
    path, result = resume_path(tmp_path)
    assert result.stop_reason.kind == "converged"
    assert len(path) <= MAX_STAYS, f"{len(path)} stays:\n{describe(path, ENGINE_DIR)}"
    assert returns_of(path) <= MAX_RETURNS, (
        f"{returns_of(path)} returns:\n{describe(path, ENGINE_DIR)}"
    )


def test_the_path_counter_counts_returns_to_a_module_left() -> None:

    a1, a2, b1, a3 = code("f", "a"), code("g", "a"), code("h", "b"), code("i", "a")
    assert returns_of([a1, a2]) == 0
    assert returns_of([a1, b1]) == 0
    assert returns_of([a1, b1, a3]) == 1
