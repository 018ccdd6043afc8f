"""Following a path through the code: the functions it stays in, the modules it
returns to. Two walks are followed: a decision from the inbox to the hand-off of its
resume, and a resume of a paused run to its stop. ``docs/hooks/figures.py`` prints
their figures into docs/architecture.md for readers; tests/test_decision_path.py
checks what the decision's path must pass through (the access policy, the record).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

from fastapi import Request

from audit import open_store
from audit.people import authenticate
from audit.store import SqlRunStore
from converge.web import create_app
from converge.web import gates as web_gates
from engine import Context, Engine, GateDecision, Proposal, RunResult, suggestor
from gates import require_approval

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = tuple(str(ROOT / p) + "/" for p in ("engine", "audit", "converge", "gates", "criteria"))
DECISION_CODE = tuple(
    str(ROOT / "converge" / p) for p in ("web/gates.py", "decisions/", "governance/")
)
"""The decision's own code: the route's module and the two packages of issue 39."""
ENGINE_DIR = str(ROOT / "engine") + "/"
PARTS = ("_cycle/cursor.py", "_cycle/spend.py", "_cycle/run_parts.py")
"""The modules of the run's parts: their verbs and properties are not stays."""


def returns_of(path: list[CodeType]) -> int:
    """How many times ``path`` moves into a module it had already left."""
    left: set[str] = set()
    here: str | None = None
    back = 0
    for code in path:
        module = code.co_filename
        if module != here:
            back += module in left
            if here is not None:
                left.add(here)
            here = module
    return back


def describe(path: list[CodeType], root: str = str(ROOT)) -> str:
    """One line per stay: its file under ``root`` and its function's name."""
    start = len(root.rstrip("/")) + 1
    return "\n".join(f"  {c.co_filename[start:]}:{c.co_name}" for c in path)


def code(name: str, module: str) -> CodeType:
    """A code object named ``name`` in file ``module``, to test a counter with."""
    return compile("pass", module, "exec").replace(co_name=name)


class NotingQueue:
    """A run queue that only notes what it is sent (the hand-off ends the path)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    def send(self, run_id: str, action: str = "run") -> None:
        self.sent.append((run_id, action))


@contextmanager
def _inline_thread_hops() -> Iterator[None]:
    """The route's ``run_in_threadpool`` inline, so the walk stays in one thread."""

    async def inline(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    hop = web_gates.run_in_threadpool
    web_gates.run_in_threadpool = inline  # type: ignore[assignment]
    try:
        yield
    finally:
        web_gates.run_in_threadpool = hop


def decision_path(
    store: SqlRunStore, gate_id: str, token: str
) -> tuple[list[CodeType], NotingQueue]:
    """The functions ``POST /api/gates/{id}/decision`` (``api_decision``, an approval by
    the token's person) enters up to the hand-off of the resume, in first-entry order:
    a *stay* is a function of the repository's packages entered from the decision's
    own code (:data:`DECISION_CODE`), each counted once; lambdas and comprehensions
    are not stays, nor what a library calls back. The queue only notes what it is sent."""
    queue = NotingQueue()
    app = create_app(store, run_queue=queue)  # type: ignore[arg-type]
    request = Request({"type": "http", "app": app, "method": "POST", "headers": []})
    who = authenticate(store, token)
    assert who is not None
    body = web_gates.DecisionIn(approved=True, reason="looks fine")
    stays: dict[CodeType, None] = {}
    state = {"on": False, "done": False}

    def follow(frame: FrameType, event: str, arg: object) -> None:
        if event != "call" or state["done"]:
            return
        code = frame.f_code
        if code is web_gates.api_decision.__code__:
            state["on"] = True
            return
        if not state["on"]:
            return
        if code is NotingQueue.send.__code__ or code is Engine.resume.__code__:
            state["done"] = True  # handed over: the resume is not this path's
            return
        caller = frame.f_back
        if caller is None or not caller.f_code.co_filename.startswith(DECISION_CODE):
            return
        if code.co_filename.startswith(PACKAGES) and not code.co_name.startswith("<"):
            stays.setdefault(code, None)

    with _inline_thread_hops():
        sys.setprofile(follow)
        try:
            asyncio.run(web_gates.api_decision(request, gate_id, body, who))
        finally:
            sys.setprofile(None)
    return list(stays), queue


@suggestor(name="scan", dependencies=["seed"])
def _scan(ctx: Context) -> list[Proposal]:
    return [Proposal("package", "a"), Proposal("license.unknown", {"name": "b"})]


@suggestor(name="count", dependencies=["license.unknown", "package"])
def _count(ctx: Context) -> list[Proposal]:
    return [Proposal("summary", {"packages": ctx.count("package")})]


def _gated_engine(store: Any) -> Engine:
    gate = require_approval(keys=["license.unknown"], summary="Classify {content[name]}")
    return Engine(gates=[gate], store=store).register(_scan, _count)


def resume_path(folder: Path) -> tuple[list[CodeType], RunResult]:
    """The engine functions ``Engine.resume`` of a run paused at a gate, loaded from its
    store by another engine, enters to the resumed run's stop, in first-entry order
    (calls the store makes back into the engine, a suggestor's own calls and the
    run's parts' verbs are not stays), and the resumed run's result."""
    store = open_store(str(folder / "audit.db"))
    paused = _gated_engine(store).run({"seed": [1]})
    gate_id = paused.stop_reason.gate_id  # type: ignore[union-attr]
    other = _gated_engine(store)  # as another process would: from the store
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
