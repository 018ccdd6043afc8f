"""Every exception in one hierarchy across two layers, and signals no ``except
Exception`` can swallow.

- Every exception class defined in engine, criteria, gates, audit and converge is
  defined in ``engine/errors.py`` (the engine's and the store's) or in
  ``converge/errors.py`` (the application's: job files, tokens, the web, workers,
  replay), found by an AST walk; no module re-exports one under an old name.
- Every error derives from ``ConvergeError``; the control-flow signals
  (``StopRun``, ``ToolBudgetHit``) derive from ``BaseException`` only, so a
  suggestor's ``except Exception:`` around code that raises ``StopRun`` does not
  keep the run from stopping.
"""

from __future__ import annotations

import ast
import asyncio
import builtins
import pickle
from pathlib import Path
from typing import Any

import pytest

import converge.errors
import engine.errors
from converge.errors import RemoteSuggestorError
from engine import Context, Engine, Proposal, StopRequested, StopRun, suggestor
from engine.errors import ConvergeError, ToolBudgetHit

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("engine", "criteria", "gates", "audit", "converge")
ERRORS = {"engine/errors.py": engine.errors, "converge/errors.py": converge.errors}
"""The two modules of errors: the engine's (and the audit store's), the application's."""

ALLOWED_ELSEWHERE = {
    # a FastAPI response type (an HTTPException with its status and body), raised
    # by the web's routes for FastAPI to answer: it belongs with the web's answers
    ("converge/web/errors.py", "Unprocessable"),
}
"""(file, class) of the exception classes that may live outside the two error modules."""


DYNAMIC_BASES = {
    # converge.workers.wire makes one subclass per exception type a worker reports
    # (named like it: "ValueError"), at run time; the base is in converge/errors.py
    ("converge/workers/wire.py", "RemoteSuggestorError"),
    # converge.timetravel._recorded, likewise, one per exception type a run recorded
    ("converge/timetravel/_recorded.py", "ReplayedSuggestorError"),
}
"""(file, base) of the ``type(name, (base,), ...)`` exception classes allowed."""

SIGNALS = ("StopRun", "ToolBudgetHit")
NOT_CONVERGE_ERRORS = {
    # they stand for a suggestor's own exception (raised on a worker, or recorded
    # and replayed), not converge's: ``except ConvergeError`` must not take them
    "RemoteSuggestorError",
    "ReplayedSuggestorError",
}


def _sources() -> list[tuple[str, ast.Module]]:
    out = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            out.append((path.relative_to(ROOT).as_posix(), ast.parse(path.read_text())))
    return out


def _base_name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _exception_names(sources: list[tuple[str, ast.Module]]) -> set[str]:
    """The names of builtin exceptions and of every class deriving from one, by name
    (to a fixed point: a class of one module may derive from one of another)."""
    names = {
        n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException)
    }
    classes = [n for _, tree in sources for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    while True:
        more = {
            c.name
            for c in classes
            if c.name not in names
            and any(
                _base_name(b) in names
                # a library's exception (HTTPException); engine.stop.Error is a stop reason
                or (_base_name(b).endswith(("Error", "Exception")) and _base_name(b) != "Error")
                for b in c.bases
            )
        }
        if not more:
            return names
        names |= more


def test_every_exception_class_is_defined_in_one_of_the_two_error_modules() -> None:
    sources = _sources()
    exceptions = _exception_names(sources)
    elsewhere = []
    for path, tree in sources:
        if path in ERRORS:
            continue
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.ClassDef)
                and node.name in exceptions
                and (path, node.name) not in ALLOWED_ELSEWHERE
            ):
                elsewhere.append(f"{path}:{node.lineno}: class {node.name}")
            # type(name, (Base,), namespace): a class made at run time
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "type"
                and len(node.args) == 3
                and isinstance(node.args[1], ast.Tuple)
            ):
                for base in node.args[1].elts:
                    name = _base_name(base)
                    if name in exceptions and (path, name) not in DYNAMIC_BASES:
                        elsewhere.append(f"{path}:{node.lineno}: type(..., ({name},), ...)")
    assert elsewhere == []


@pytest.mark.parametrize("path", sorted(ERRORS))
def test_every_class_of_each_error_module_is_in_its_all(path: str) -> None:
    tree = ast.parse((ROOT / path).read_text())
    defined = sorted(n.name for n in tree.body if isinstance(n, ast.ClassDef))
    assert sorted(ERRORS[path].__all__) == defined


@pytest.mark.parametrize("path", sorted(ERRORS))
def test_every_error_is_a_converge_error_and_every_signal_a_base_exception_only(
    path: str,
) -> None:
    module = ERRORS[path]
    classes = {name: getattr(module, name) for name in module.__all__}
    for name, cls in classes.items():
        if name in SIGNALS:
            assert issubclass(cls, BaseException) and not issubclass(cls, Exception), name
        elif name in NOT_CONVERGE_ERRORS:
            assert issubclass(cls, Exception) and not issubclass(cls, ConvergeError), name
        else:
            assert issubclass(cls, ConvergeError), name


def test_the_application_errors_are_not_defined_by_the_engine() -> None:
    assert set(engine.errors.__all__).isdisjoint(converge.errors.__all__)
    for name in ("JobFileError", "LoginRequired", "BadToken", "NotAllowed", "ReplayError"):
        assert not hasattr(engine.errors, name), name


def test_no_module_re_exports_an_error_under_the_name_it_had_before() -> None:
    # an ``import X as X`` of an error outside a package's face is a leftover shim
    shims = []
    for path, tree in _sources():
        if path.endswith("__init__.py") or path in ERRORS:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module in (
                "engine.errors",
                "converge.errors",
            ):
                shims += [f"{path}: {a.name}" for a in node.names if a.asname == a.name]
    assert shims == []


def test_a_web_error_carries_its_http_status() -> None:
    assert converge.errors.NotAllowed.http_status == 403
    assert converge.errors.BadToken.http_status == 403  # a NotAllowed
    assert converge.errors.LoginRequired.http_status == 401
    assert converge.errors.InvalidValue.http_status == 422
    assert converge.errors.MissingReason.http_status == 422
    assert converge.errors.ReplayError.http_status == 400


def test_a_missing_gate_is_found_beside_a_missing_run_not_among_resume_errors() -> None:
    assert issubclass(engine.errors.GateNotFound, engine.errors.NotFound)
    assert issubclass(engine.errors.RunNotFound, engine.errors.NotFound)
    assert not issubclass(engine.errors.GateNotFound, engine.errors.ResumeError)


def test_the_signals_pickle_with_what_they_carry() -> None:
    stop = pickle.loads(pickle.dumps(StopRun("enough", context={"n": 1})))
    assert (stop.message, stop.context) == ("enough", {"n": 1})


# -- the signals -------------------------------------------------------------------------
@suggestor(name="counter", dependencies=["n"])
def counter(ctx: Context) -> list[Proposal]:
    return [Proposal("n", ctx.count("n"))]


def _judge_at(cycle: int) -> Any:
    """A suggestor that stops the run at ``cycle`` through a helper it wraps in a
    broad ``except Exception`` (as code around a library call often is)."""

    def stop_when_done(ctx: Context) -> None:
        if ctx.cycle >= cycle:
            raise StopRun("enough", context={"seen": ctx.count("n")})

    @suggestor(name="judge", dependencies=["n"])
    def judge(ctx: Context) -> list[Proposal]:
        try:
            stop_when_done(ctx)
        except Exception:  # must not swallow the signal
            return [Proposal("swallowed", True)]
        return []

    return judge


def _async_judge_at(cycle: int) -> Any:
    @suggestor(name="judge", dependencies=["n"])
    async def judge(ctx: Context) -> list[Proposal]:
        try:
            await asyncio.sleep(0)
            if ctx.cycle >= cycle:
                raise StopRun("enough", context={"seen": ctx.count("n")})
        except Exception:  # must not swallow the signal
            return [Proposal("swallowed", True)]
        return []

    return judge


@pytest.mark.parametrize("make", [_judge_at, _async_judge_at], ids=["sync", "async"])
def test_a_suggestors_except_exception_cannot_swallow_stop_run(make: Any) -> None:
    engine = Engine()
    engine.register(counter, make(2))

    r = engine.run({"n": [0]})

    assert r.stop_reason == StopRequested(source="judge", message="enough", context={"seen": 2})
    assert r.context.count("swallowed") == 0


def test_a_tools_except_exception_cannot_swallow_a_tool_budget_hit() -> None:
    from engine import InvocationBudgetExhausted

    hit = InvocationBudgetExhausted(invocations=1, limit=1, suggestor="agent.search")
    with pytest.raises(ToolBudgetHit) as caught:
        try:
            raise ToolBudgetHit(hit)
        except Exception:  # pragma: no cover - what the signal goes through
            pytest.fail("ToolBudgetHit was caught as an Exception")
    assert caught.value.reason == hit


def test_keyboard_interrupt_in_a_suggestor_still_interrupts_the_run() -> None:
    @suggestor(name="interrupted", dependencies=["n"])
    def interrupted(ctx: Context) -> list[Proposal]:
        raise KeyboardInterrupt

    engine = Engine()
    engine.register(counter, interrupted)
    with pytest.raises(KeyboardInterrupt):
        engine.run({"n": [0]})


def test_a_remote_suggestor_error_reads_as_the_workers_exception() -> None:
    pytest.importorskip("celery")
    from converge.workers.wire import outcome_of

    exc = outcome_of({"raised": {"type": "ValueError", "message": "bad"}}, "s")

    assert isinstance(exc, RemoteSuggestorError) and not isinstance(exc, ConvergeError)
    assert (type(exc).__name__, str(exc)) == ("ValueError", "bad")
