"""Suggestors, engines and a small process entry point for the durable HITL tests.

Tests start other processes with ``python -m tests.hitlfixtures COMMAND ...``; each
builds the same engine (same suggestor names) on the same store and prints one
JSON line on stdout. Commands:

- ``run URL RUN_ID``: start a run (it pauses at the gate).
- ``resume URL GATE_ID approve|reject BY``: decide the gate and resume the run.
- ``race URL GATE_ID BARRIER_DIR N``: wait until N racers are ready (one file
  each in BARRIER_DIR), then approve the gate; prints ``won``, ``already`` or ``busy``.
- ``recover URL RUN_ID``: ``resume_run`` a stopped, expired or crashed run.

With ``$HITL_SLOW_MARKER`` set, the ``finish`` suggestor writes that file and then
blocks for ten minutes: a process to kill in the middle of a resumed run.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from audit import SqlRunStore, open_store
from criteria import Blocked, criterion
from engine import Context, Engine, GateDecision, Proposal, RunResult, suggestor
from engine.errors import GateAlreadyDecided, RunBusy
from engine.facts import fact_to_dict
from engine.store import RunStore

SLOW_ENV = "HITL_SLOW_MARKER"
INITIAL: dict[str, list[Any]] = {"seed": [1]}
"""The initial facts of every run of these tests."""


SCANNED = (
    Proposal("package", "a"),
    Proposal("license.unknown", {"name": "b"}),
    Proposal("package", "c"),
)
"""What :func:`scan` proposes: two packages and one package of unknown license."""


@suggestor(name="scan", dependencies=["seed"])
def scan(ctx: Context) -> list[Proposal]:
    """Finds two packages and one package of unknown license (gated): :data:`SCANNED`."""
    return list(SCANNED)


@suggestor(name="count", dependencies=["license.unknown", "package"])
def count(ctx: Context) -> list[Proposal]:
    """Summarises what is known."""
    return [
        Proposal(
            "summary", {"unknown": ctx.count("license.unknown"), "packages": ctx.count("package")}
        )
    ]


@suggestor(name="finish", dependencies=["summary"])
def finish(ctx: Context) -> list[Proposal]:
    """Copies the last summary; blocks when ``$HITL_SLOW_MARKER`` is set (kill -9 tests)."""
    marker = os.environ.get(SLOW_ENV)
    if marker:
        Path(marker).write_text(str(os.getpid()))
        time.sleep(600)  # the test kills this process long before
    return [Proposal("done", ctx.get("summary")[-1].content)]


SUGGESTORS = (scan, count, finish)


@criterion(id="signed_off")
def signed_off(ctx: Context) -> Blocked | None:
    """Only a person can sign the audit off (a criterion blocked on a human)."""
    return Blocked("a person must sign the audit off", approval_ref="ticket-7")


def make_engine(store: RunStore | None = None, *, gated: bool = True, **kw: Any) -> Engine:
    """The engine of these tests: scan, count, finish; a gate on ``license.unknown``."""
    from gates import require_approval

    gates = (
        [require_approval(keys=["license.unknown"], summary="Classify {content[name]}", **kw)]
        if gated
        else []
    )
    engine = Engine(gates=gates, store=store)
    engine.register(*SUGGESTORS)
    return engine


def facts_of(result: RunResult) -> list[dict[str, Any]]:
    """The run's facts as JSON-ready dicts, in promotion order."""
    return [fact_to_dict(f) for f in result.context]


def _report(result: RunResult) -> dict[str, Any]:
    return {"stop": result.stop_reason.kind_code(), "facts": facts_of(result)}


def _barrier(directory: str, n: int) -> None:
    Path(directory, str(os.getpid())).touch()
    deadline = time.monotonic() + 60
    while len(os.listdir(directory)) < n and time.monotonic() < deadline:
        time.sleep(0.005)


def main(argv: list[str]) -> int:
    """Run one command (see the module docstring); print one JSON line."""
    from audit import open_store

    command, url, *rest = argv
    store = open_store(url)
    engine = make_engine(store)
    out: dict[str, Any]
    if command == "run":
        out = _report(engine.run(INITIAL, run_id=rest[0]))
    elif command == "resume":
        gate_id, verdict, by = rest
        decision = GateDecision(approved=verdict == "approve", by=by)
        out = _report(engine.resume(gate_id, decision))
    elif command == "race":
        gate_id, directory, n = rest
        _barrier(directory, int(n))
        try:
            result = engine.resume(gate_id, GateDecision.approve(by=f"racer-{os.getpid()}"))
            out = {"outcome": "won", **_report(result)}
        except GateAlreadyDecided:
            out = {"outcome": "already"}
        except RunBusy:
            out = {"outcome": "busy"}
    elif command == "recover":
        out = _report(engine.resume_run(rest[0]))
    else:
        raise SystemExit(f"unknown command {command!r}")
    sys.stdout.write(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))


# -- for the tests themselves (not used by the processes they start) -----------------
STORES = ("sqlite", "postgresql")
"""The ``store_url`` fixtures of the durable HITL tests are parametrised over these."""


def store_url_for(kind: str, tmp_path: Path) -> Any:
    """A context manager yielding a fresh store URL of ``kind`` (sqlite or postgresql).

    PostgreSQL: a throwaway schema on ``$CONVERGE_TEST_PG_URL``; skipped when the
    server is unreachable, unless ``$CI`` is set (then the test fails).
    """
    from contextlib import nullcontext

    import pytest

    from audit.testing import pg_schema, pg_unreachable_reason

    if kind == "sqlite":
        return nullcontext(str(tmp_path / "hitl.db"))
    reason = pg_unreachable_reason()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return pg_schema("converge_hitl")


def opened_store(kind: str, tmp_path: Path) -> Iterator[SqlRunStore]:
    """A fresh store of ``kind`` (see :func:`store_url_for`), closed afterwards."""
    with store_url_for(kind, tmp_path) as url:
        s = open_store(url)
        try:
            yield s
        finally:
            s.close()
