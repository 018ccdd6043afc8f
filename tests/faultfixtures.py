"""The fault-injection harness of the exactly-once tests (issue 28).

- :func:`run_cli` runs ``converge ...`` in a new interpreter (``python -m
  converge.cli``); :func:`fork_cli` runs it in a child forked from this process,
  which has imported converge already (milliseconds instead of a second), and
  :func:`fork_race` starts several such children past one barrier, so their
  commands begin within the same millisecond. A child gets ``kill_after=N`` as
  ``$CONVERGE_FAULT_KILL_AFTER_WRITES`` (``audit.testing``): it SIGKILLs itself after
  its Nth committed write, and its return code is then :data:`KILLED` (-9).
- :func:`make_stores`: fresh stores and copies of a store, one per trial (a SQLite
  file copied with the backup API; a PostgreSQL schema per store, dropped after).
- :func:`paused_run` / :func:`stopped_run`: a run paused at a HITL gate in cycle 2,
  and a run stopped by its cycle budget, made by ``converge run`` on job files of
  :mod:`tests.exactlyoncejobs`.
- :func:`snapshot` / :func:`differences`: what a run holds (facts, facts root, stop,
  resumes) and how two runs differ, in one line per difference.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import itertools
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
import traceback
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import text

import converge.cli
import tests.exactlyoncejobs  # noqa: F401 - imported once here, not in every child
from audit import open_store, testing
from audit.store import SqlRunStore
from audit.testing import KILL_AFTER_WRITES_ENV
from tests.storecopies import PgStores, SqliteStores, Stores, sql_engine

__all__ = [
    "BUDGET_EXIT",
    "CRASH",
    "KILLED",
    "PAUSED_EXIT",
    "CliOutcome",
    "PausedRun",
    "RunSnapshot",
    "StoppedRun",
    "Stores",
    "differences",
    "expire_gate",
    "fork_cli",
    "fork_race",
    "make_stores",
    "paused_run",
    "run_cli",
    "snapshot",
    "stopped_run",
]

ROOT = Path(__file__).resolve().parent.parent
KILLED = -signal.SIGKILL
"""The return code of a process killed by the fault hook (or any SIGKILL)."""
CRASH = 70
"""The return code :func:`fork_cli` gives a command that raised (a crash, not a refusal)."""
PAUSED_EXIT = 10
BUDGET_EXIT = 3
COMMAND_TIMEOUT_S = 120.0
"""No command of these tests takes more than a few seconds; past this, it hangs."""


@dataclass(frozen=True, slots=True)
class CliOutcome:
    """How one ``converge`` command ended."""

    returncode: int
    stdout: str
    stderr: str
    pid: int = 0

    @property
    def killed(self) -> bool:
        """Killed by SIGKILL (the fault hook)."""
        return self.returncode == KILLED

    @property
    def crashed(self) -> bool:
        """The command raised instead of exiting with a code of its own."""
        return self.returncode == CRASH or "Traceback (most recent call last)" in self.stderr

    @property
    def message(self) -> str:
        """The last line it printed on stderr (its error, if any), whitespace folded."""
        lines = [ln for ln in self.stderr.splitlines() if ln.strip()]
        return " ".join(lines[-1].split()) if lines else ""

    def __str__(self) -> str:
        return f"exit {self.returncode}: {self.message or '(nothing on stderr)'}"


def run_cli(
    args: Sequence[str], *, env: dict[str, str] | None = None, timeout: float = COMMAND_TIMEOUT_S
) -> CliOutcome:
    """``converge ARGS`` in a new interpreter, with ``env`` over this environment."""
    base = {k: v for k, v in os.environ.items() if k != KILL_AFTER_WRITES_ENV}
    proc = subprocess.run(
        [sys.executable, "-m", "converge.cli", *args],
        cwd=ROOT,
        env={**base, "PYTHONPATH": str(ROOT), **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return CliOutcome(proc.returncode, proc.stdout, proc.stderr)


# -- forked children --------------------------------------------------------------------
_FORK = multiprocessing.get_context("fork")


def _redirect(fd: int, path: Path) -> io.TextIOWrapper:
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(target, fd)
    os.close(target)
    return io.TextIOWrapper(
        io.FileIO(fd, "w", closefd=False), encoding="utf-8", errors="replace", write_through=True
    )


def _invoke(args: list[str]) -> int:
    try:
        converge.cli.app(args, prog_name="converge")
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except BaseException:
        traceback.print_exc()
        return CRASH
    return 0


def _child(args: list[str], kill_after: int | None, out: Path, err: Path, barrier: Any) -> None:
    """A forked child: run ``converge ARGS`` with its output in files, then ``_exit``."""
    code = CRASH
    try:
        sys.stdout = _redirect(1, out)
        sys.stderr = _redirect(2, err)
        if kill_after is None:
            os.environ.pop(KILL_AFTER_WRITES_ENV, None)
        else:
            os.environ[KILL_AFTER_WRITES_ENV] = str(kill_after)
        importlib.reload(testing)  # the hook reads its variable once per process
        if barrier is not None:
            barrier.wait(30)
        code = _invoke(args)
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # exiting anyway
                stream.flush()
        os._exit(code)


_numbers = itertools.count(1)


def fork_race(
    commands: Sequence[Sequence[str]], workdir: Path, *, kill_after: int | None = None
) -> list[CliOutcome]:
    """Run each command in its own forked child; all start past one barrier together."""
    workdir.mkdir(parents=True, exist_ok=True)
    barrier = _FORK.Barrier(len(commands)) if len(commands) > 1 else None
    children: list[tuple[Any, Path, Path]] = []
    for args in commands:
        n = next(_numbers)
        out, err = workdir / f"cmd{n}.out", workdir / f"cmd{n}.err"
        proc = _FORK.Process(target=_child, args=(list(args), kill_after, out, err, barrier))
        proc.start()
        children.append((proc, out, err))
    deadline = time.monotonic() + COMMAND_TIMEOUT_S
    for proc, _, _ in children:
        proc.join(max(0.0, deadline - time.monotonic()))
    hung = [err for proc, _, err in children if proc.exitcode is None]
    for proc, _, _ in children:
        if proc.exitcode is None:  # our own child: end it before saying so
            proc.kill()
            proc.join()
    if hung:
        raise AssertionError(f"converge {' '.join(commands[0])} hung: {hung[0].read_text()}")
    outcomes = [
        CliOutcome(proc.exitcode, out.read_text(), err.read_text(), proc.pid or 0)
        for proc, out, err in children
    ]
    for proc, _, _ in children:
        proc.close()
    return outcomes


def fork_cli(args: Sequence[str], workdir: Path, *, kill_after: int | None = None) -> CliOutcome:
    """``converge ARGS`` in a forked child (killed after ``kill_after`` writes, if given)."""
    [outcome] = fork_race([args], workdir, kill_after=kill_after)
    return outcome


# -- stores -------------------------------------------------------------------------------
@contextmanager
def make_stores(kind: str, tmp_path: Path) -> Iterator[Stores]:
    """Fresh stores and copies of ``kind`` ("sqlite" or "postgresql"), cleaned up after.

    PostgreSQL is skipped when unreachable, unless ``$CI`` is set (then it fails).
    """
    if kind == "sqlite":
        stores: Stores = SqliteStores(tmp_path / "stores")
    else:
        from tests.pgfixtures import require_pg

        require_pg()
        stores = PgStores("converge_eo")
    try:
        yield stores
    finally:
        stores.close()


# -- the runs the trials start from ------------------------------------------------------
@dataclass(frozen=True, slots=True)
class PausedRun:
    """A run paused at a HITL gate (``converge run`` exited 10)."""

    url: str
    run_id: str
    gate_id: str


@dataclass(frozen=True, slots=True)
class StoppedRun:
    """A run stopped by its cycle budget (``converge run`` exited 3)."""

    url: str
    run_id: str
    cycles: int


def _write_job(path: Path, job: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(job, indent=2))  # JSON is YAML
    return path


def gated_job(path: Path, *, steps: int, timeout_s: float | None = None) -> Path:
    """The job of :func:`paused_run`: pauses at cycle 2, then ``steps`` cycles more."""
    hitl: dict[str, Any] = {
        "keys": ["license.unknown"],
        "summary": "Classify the license of {content[name]} {content[version]}",
        "validate_value": "tests.exactlyoncejobs:license_value",
    }
    if timeout_s is not None:
        hitl |= {"timeout_s": timeout_s, "on_timeout": "approve"}
    return _write_job(
        path,
        {
            "name": "exactly-once-gated",
            "suggestors": [f"tests.exactlyoncejobs:{s}" for s in ("scan", "classify", "step")],
            "budget": {"max_cycles": steps + 10},
            "gates": [{"hitl": hitl}],
            "initial": {"seed": [{"steps": steps}]},
        },
    )


def ticking_job(path: Path, *, max_cycles: int) -> Path:
    """The job of :func:`stopped_run`: one new fact a cycle, stopped by ``max_cycles``."""
    return _write_job(
        path,
        {
            "name": "exactly-once-ticking",
            "suggestors": ["tests.exactlyoncejobs:tick"],
            "budget": {"max_cycles": max_cycles},
            "initial": {"seed": [1]},
        },
    )


def _only_run(url: str) -> str:
    store = open_store(url)
    try:
        [run] = store.runs(limit=2)
        return run.run_id
    finally:
        store.close()


def paused_run(
    stores: Stores, workdir: Path, *, steps: int = 8, timeout_s: float | None = None
) -> PausedRun:
    """A fresh store holding one run paused at a gate on ``license.unknown``, in cycle 2."""
    job = gated_job(workdir / "gated.yaml", steps=steps, timeout_s=timeout_s)
    url = stores.fresh()
    ran = fork_cli(["run", str(job), "--db", url], workdir)
    assert ran.returncode == PAUSED_EXIT, ran
    store = open_store(url)
    try:
        [gate] = store.gates(pending=True)
        assert gate.cycle == 2, gate
        return PausedRun(url, gate.run_id, gate.gate_id)
    finally:
        store.close()


def stopped_run(stores: Stores, workdir: Path, *, max_cycles: int = 3) -> StoppedRun:
    """A fresh store holding one run stopped by its cycle budget after ``max_cycles``."""
    job = ticking_job(workdir / "ticking.yaml", max_cycles=max_cycles)
    url = stores.fresh()
    ran = fork_cli(["run", str(job), "--db", url], workdir)
    assert ran.returncode == BUDGET_EXIT, ran
    return StoppedRun(url, _only_run(url), max_cycles)


def expire_gate(url: str, gate_id: str, *, ago_s: float = 60.0) -> None:
    """Move the gate's deadline ``ago_s`` seconds into the past (no waiting, no clock)."""
    engine = sql_engine(url)
    try:
        with engine.begin() as conn:
            done = conn.execute(
                text("UPDATE gates SET expires_at = :t WHERE gate_id = :g AND status = 'pending'"),
                {"t": time.time() - ago_s, "g": gate_id},
            )
            assert done.rowcount == 1, f"no pending gate {gate_id}"
    finally:
        engine.dispose()


# -- what a run holds ---------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class RunSnapshot:
    """A run as the store has it.

    ``facts``: (id, key, canonical JSON of the content) in promotion order, as
    ``store.facts`` reads them; ``promoted``: the fact id of every ``fact_promoted``
    event; ``resumed_at``: the seq of every ``run_resumed`` event (see :meth:`legs_after`).
    """

    run_id: str
    facts: tuple[tuple[str, str, str], ...]
    promoted: tuple[str, ...]
    facts_root: str | None
    kind: str | None
    status: str
    pid: int | None
    last_seq: int
    resumed_at: tuple[int, ...]

    @property
    def duplicates(self) -> list[str]:
        """Fact ids recorded more than once (as facts, or as promotions)."""
        twice = Counter(f[0] for f in self.facts) | Counter(self.promoted)
        return sorted(i for i, n in twice.items() if n > 1)

    def contents(self) -> dict[str, tuple[str, str]]:
        """id → (key, content JSON) (the last one of an id recorded twice)."""
        return {i: (k, c) for i, k, c in self.facts}

    def legs_after(self, seq: int) -> int:
        """How many times the run was continued after ``seq``: its ``run_resumed``
        events, those in a row counted once (``resume_run`` of a decided gate records
        ``{"from": "stop"}`` and then ``{"gate_id": ...}``, one continuation)."""
        mine = set(self.resumed_at)
        return sum(1 for s in self.resumed_at if s > seq and s - 1 not in mine)


def _canonical(content: Any) -> str:
    return json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def snapshot(url: str, run_id: str) -> RunSnapshot:
    """Read ``run_id`` from the store at ``url`` (opened and closed here)."""
    store = open_store(url)
    try:
        run = store.run(run_id)
        facts = tuple((f.id, f.key, _canonical(f.content)) for f in store.facts(run_id))
        events = store.events(run_id, kinds=["fact_promoted", "run_resumed"])
        return RunSnapshot(
            run_id=run_id,
            facts=facts,
            promoted=tuple(str(e.payload.get("id")) for e in events if e.kind == "fact_promoted"),
            facts_root=run.facts_root,
            kind=run.kind,
            status=run.status,
            pid=run.pid,
            last_seq=run.last_seq,
            resumed_at=tuple(e.seq for e in events if e.kind == "run_resumed"),
        )
    finally:
        store.close()


def _short(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def differences(got: RunSnapshot, want: RunSnapshot) -> list[str]:
    """How ``got`` differs from ``want`` (facts by id and content, facts root, stop
    kind) and the fact ids ``got`` holds twice; one short line each, [] when equal."""
    found: list[str] = []
    if got.duplicates:
        found.append(f"{len(got.duplicates)} fact ids twice, e.g. {got.duplicates[:3]}")
    mine, theirs = got.contents(), want.contents()
    missing = [i for i in theirs if i not in mine]
    extra = [i for i in mine if i not in theirs]
    changed = [i for i in theirs if i in mine and mine[i] != theirs[i]]
    if missing:
        found.append(f"{len(missing)} facts missing, e.g. {missing[:3]}")
    if extra:
        found.append(f"{len(extra)} facts extra, e.g. {extra[:3]}")
    if changed:
        i = changed[0]
        found.append(
            f"{len(changed)} facts with other contents, e.g. {i}: "
            f"{_short(mine[i][1])} instead of {_short(theirs[i][1])}"
        )
    if got.facts_root != want.facts_root:
        found.append(f"facts_root {got.facts_root!s:.12} instead of {want.facts_root!s:.12}")
    if got.kind != want.kind:
        found.append(f"stop {got.kind} instead of {want.kind}")
    return found


@contextmanager
def opened(url: str, *, key: bytes | str | None = None) -> Iterator[SqlRunStore]:
    """The store at ``url`` (``key``: :func:`audit.open_store`'s), closed after."""
    store = open_store(url, key=key)
    try:
        yield store
    finally:
        store.close()
