"""A decision followed through the code stays short (issue 39, docs/architecture.md).

A reader follows ``POST /api/gates/{id}/decision`` (``converge.web.gates.api_decision``)
as a token-authenticated approver decides a pending gate, from the route's entry to
the point where the run's resume is handed over: the queue's ``send`` (or
``Engine.resume``, for a decision that resumes its run in this process). What is
counted:

- a *stay*: a function of the repository's packages (``engine``, ``audit``,
  ``converge``, ``gates``, ``criteria``) entered on that path from the decision's
  own code (:data:`DECISION_CODE`: the route's module, ``converge/decisions/``,
  ``converge/governance/``), each counted once, in the order first entered. So
  the decision's own functions are followed, and each function they call into
  elsewhere (the store's, the job loader's, the gates', the web's) is a stay,
  not followed further inside: the store's transaction and chain, the engine's
  resume (``tests/test_resume_path.py`` pins it), and the answer's rendering
  after the hand-off are not on the path. Lambdas and comprehensions are not
  stays; functions a library calls back (SQLAlchemy, pydantic, the ``with`` of
  a context manager) are not on the path;
- a *return*: each time the path moves into a module (a file) it had already left.

The route's thread hops (``run_in_threadpool``) run inline so that the whole walk
happens in the profiled thread; the queue only notes what it was sent. Before
issue 39 (``converge/decisions.py`` one 91-line ``decide`` with governance,
signatures, the access log and quorum votes as extra stops; the decision's own
code then ``web/gates.py``, ``decisions.py``, ``governance.py``, ``deciders.py``
and ``signed_decisions.py``), this path took 22 stays and 7 returns for a single
approval, 23 and 7 for the deciding vote of a quorum (25 and 26 stays counting
everything entered from any ``converge`` module). Issue 39's bounds are 15 and 5;
it takes 14 and 2 (17 stays counting from any ``converge`` module).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

import pytest
from fastapi import Request

from audit import open_store
from audit.people import add_token, authenticate, votes
from audit.store import SqlRunStore
from converge.web import create_app
from converge.web import gates as web_gates
from engine import Engine, GateDecision
from engine.errors import StoreError
from tests.pathcounting import describe, returns_of
from tests.webfixtures import quorum_job, run_job

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = tuple(str(ROOT / p) + "/" for p in ("engine", "audit", "converge", "gates", "criteria"))
DECISION_CODE = tuple(
    str(ROOT / "converge" / p) for p in ("web/gates.py", "decisions/", "governance/")
)
"""The decision's own code: the route's module and the two packages of issue 39."""
MAX_STAYS = 15
MAX_RETURNS = 5


class NotingQueue:
    """A run queue that only notes what it is sent (the hand-off ends the path)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    def send(self, run_id: str, action: str = "run") -> None:
        self.sent.append((run_id, action))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlRunStore]:
    s = open_store(str(tmp_path / "decide.db"))
    try:
        yield s
    finally:
        s.close()


def _ours(code: CodeType) -> bool:
    return code.co_filename.startswith(PACKAGES)


def _inline(monkeypatch: pytest.MonkeyPatch) -> None:
    async def inline(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    monkeypatch.setattr(web_gates, "run_in_threadpool", inline)


def decision_path(
    store: SqlRunStore, gate_id: str, token: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[CodeType], NotingQueue]:
    """The functions ``api_decision`` enters up to the hand-off, in first-entry order."""
    queue = NotingQueue()
    app = create_app(store, run_queue=queue)  # type: ignore[arg-type]
    _inline(monkeypatch)
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
        if _ours(code) and not code.co_name.startswith("<"):
            stays.setdefault(code, None)

    sys.setprofile(follow)
    try:
        asyncio.run(web_gates.api_decision(request, gate_id, body, who))
    finally:
        sys.setprofile(None)
    return list(stays), queue


def _gate(store: SqlRunStore, required: int) -> str:
    result = run_job(quorum_job(required), store)
    assert result.stop_reason.kind_code() == "hitl_gate_pending"
    return store.gates(pending=True)[0].gate_id


def _check(path: list[CodeType]) -> None:
    assert {"decide", "record_decision"} <= {c.co_name for c in path}, describe(path, str(ROOT))
    shown = f"{len(path)} stays, {returns_of(path)} returns:\n{describe(path, str(ROOT))}"
    assert len(path) <= MAX_STAYS, shown
    assert returns_of(path) <= MAX_RETURNS, shown


def test_a_decision_from_the_inbox_passes_through_few_functions_and_returns(
    store: SqlRunStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate_id = _gate(store, 1)
    token = add_token(store, "alice")
    path, queue = decision_path(store, gate_id, token, monkeypatch)
    assert store.get_gate(gate_id).status == "approved"
    assert queue.sent == [(store.get_gate(gate_id).run_id, "resume")]
    _check(path)


def test_the_deciding_vote_of_a_quorum_passes_through_few_functions_and_returns(
    store: SqlRunStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from converge.decisions import decide

    gate_id = _gate(store, 2)
    decide(store, gate_id, GateDecision.approve(by="bob"), queue=NotingQueue())  # type: ignore[arg-type]
    token = add_token(store, "alice")
    path, queue = decision_path(store, gate_id, token, monkeypatch)
    assert store.get_gate(gate_id).status == "approved"
    assert len(queue.sent) == 1
    _check(path)


def test_the_deciding_vote_and_the_gate_decided_are_one_transaction(
    store: SqlRunStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from audit.people import _deciding
    from converge.decisions import decide

    gate_id = _gate(store, 2)
    decide(store, gate_id, GateDecision.approve(by="bob"), queue=NotingQueue())  # type: ignore[arg-type]
    events = len(store.events(store.get_gate(gate_id).run_id))

    def fails(*args: Any, **kwargs: Any) -> Any:
        raise StoreError("the disk is full")

    monkeypatch.setattr(_deciding, "settle_gate", fails)
    queue = NotingQueue()
    with pytest.raises(StoreError):
        decide(store, gate_id, GateDecision.approve(by="carol"), queue=queue)  # type: ignore[arg-type]
    gate = store.get_gate(gate_id)
    assert gate.status == "pending" and queue.sent == []
    assert [v.voter for v in votes(store, gate_id)] == ["bob"]  # carol's vote rolled back
    assert len(store.events(gate.run_id)) == events
    monkeypatch.undo()
    report = decide(store, gate_id, GateDecision.approve(by="carol"), queue=queue)  # type: ignore[arg-type]
    assert report.gate.status == "approved" and report.gate.decided_by == "bob, carol"
    assert len(queue.sent) == 1


def test_the_path_counter_fails_a_path_over_its_bounds() -> None:
    names = ("decide", "record_decision")

    def step(i: int) -> CodeType:
        name = names[i] if i < len(names) else f"f{i}"
        return compile("pass", f"m{i % 2}", "exec").replace(co_name=name)

    long_path = [step(i) for i in range(MAX_STAYS + 1)]
    with pytest.raises(AssertionError, match="stays"):
        _check(long_path)
    bouncing = [step(i) for i in range(MAX_RETURNS + 3)]
    assert returns_of(bouncing) > MAX_RETURNS
    with pytest.raises(AssertionError, match="returns"):
        _check(bouncing)
    with pytest.raises(AssertionError, match="f2"):
        _check([step(i) for i in range(2, 5)])  # a path that never decided: not counted
