"""Kill -9 at every write boundary, recover, and nothing is lost or recorded twice (issue 28).

For ``converge approve GATE --by alice --value MIT`` on a run paused at a HITL gate,
and for ``converge resume RUN --max-cycles M`` on a run stopped by its cycle budget:
the command is killed (``$CONVERGE_FAULT_KILL_AFTER_WRITES=N``, ``audit.testing``)
right after its Nth committed write, for N = 1, 2, ... until it completes; then
recovered with the documented command (an approve killed before its decision was
recorded: approve again; otherwise ``converge resume RUN``; a killed resume is
also recovered by repeating it, budget included). Every recovered run must equal
an uninterrupted run of the same command on a copy of the store: facts (ids and
contents), facts root and stop, no fact id twice, a chain that verifies. On SQLite
and PostgreSQL (required under CI).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from audit import open_store
from audit.testing import KILL_AFTER_WRITES_ENV
from tests.faultfixtures import (
    BUDGET_EXIT,
    CliOutcome,
    RunSnapshot,
    Stores,
    differences,
    fork_cli,
    make_stores,
    paused_run,
    run_cli,
    snapshot,
    stopped_run,
)

MAX_BOUNDARIES = 20
"""A sweep longer than this means the commands write far more than they should (a
command's lease renewals, one every 10 s of a 30 s lease, are writes too: a loaded
CI machine made a command of 15 writes take 16)."""
MIN_BOUNDARIES = 5
"""Each command of these tests commits at least this many writes (decision, claim, cycles, stop)."""
BAD_INPUT = 2
"""The exit code of a refusal (a finished run, a decided gate): a clear error, no crash."""

Recovery = Callable[[str], list[list[str]]]
"""Given the killed trial's store, the commands (without ``--db``) that recover it."""


@pytest.fixture(params=["sqlite", "postgresql"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stores]:
    """Stores of one kind for this test: fresh ones and copies, removed afterwards."""
    with make_stores(request.param, tmp_path) as made:
        yield made


def _verify(url: str, run_id: str) -> str | None:
    store = open_store(url)
    try:
        report = store.verify(run_id)
    finally:
        store.close()
    return None if report.ok else str(report)


def _check_finished(outcome: CliOutcome, expected: int, what: str) -> list[str]:
    """A command that must end by itself: the stop's exit code, or a clear refusal."""
    if outcome.killed or outcome.crashed:
        return [f"{what} did not end cleanly: {outcome}"]
    if outcome.returncode not in (expected, BAD_INPUT):
        return [f"{what}: {outcome} (expected exit {expected})"]
    if outcome.returncode == BAD_INPUT and "error:" not in outcome.stderr:
        return [f"{what}: exit 2 without an error message"]
    return []


def sweep(
    stores: Stores,
    template: str,
    run_id: str,
    command: list[str],
    expected_exit: int,
    recovery: Recovery,
    workdir: Path,
) -> tuple[int, list[str]]:
    """Kill ``command`` after each of its writes on a copy of ``template``, recover.

    Returns how many boundaries were swept (the command's writes) and one line per
    boundary whose recovered run differs from the uninterrupted one.
    """
    base = stores.copy(template)
    uninterrupted = fork_cli([*command, "--db", base], workdir)
    assert uninterrupted.returncode == expected_exit, uninterrupted
    want: RunSnapshot = snapshot(base, run_id)
    assert not want.duplicates, want.duplicates
    assert _verify(base, run_id) is None, _verify(base, run_id)
    stores.discard(base)
    problems: list[str] = []
    for n in range(1, MAX_BOUNDARIES + 2):
        url = stores.copy(template)
        try:
            cut = fork_cli([*command, "--db", url], workdir, kill_after=n)
            if not cut.killed:  # it completed before its nth write: every boundary is swept
                finished = _check_finished(cut, expected_exit, f"uncut run (N={n})")
                got = snapshot(url, run_id)
                return n - 1, problems + finished + [
                    f"uncut run (N={n}): {d}" for d in differences(got, want)
                ]
            found: list[str] = []
            for args in recovery(url):
                recovered = fork_cli([*args, "--db", url], workdir)
                found += _check_finished(recovered, expected_exit, f"recovery {args[0]}")
            got = snapshot(url, run_id)
            found += differences(got, want)
            bad_chain = _verify(url, run_id)
            if bad_chain is not None:
                found.append(f"verify: {bad_chain}")
            if found:
                problems.append(f"killed after write {n}: " + "; ".join(found))
        finally:
            stores.discard(url)
    raise AssertionError(f"still killed after {MAX_BOUNDARIES + 1} writes: {problems}")


def _report(what: str, swept: int, problems: list[str]) -> None:
    print(f"\n{what}: {swept} boundaries swept, {len(problems)} differ")
    for line in problems:
        print(f"  {line}")


def test_approve_with_a_value_killed_at_every_write_recovers_exactly(
    stores: Stores, tmp_path: Path
) -> None:
    run = paused_run(stores, tmp_path, steps=8)
    approve = ["approve", run.gate_id, "--by", "alice", "--value", "MIT"]

    def recovery(url: str) -> list[list[str]]:
        store = open_store(url)
        try:
            pending = store.get_gate(run.gate_id).status == "pending"
        finally:
            store.close()
        # the decision not recorded yet: decide again; recorded: the run goes on from it
        return [approve] if pending else [["resume", run.run_id]]

    swept, problems = sweep(stores, run.url, run.run_id, approve, 0, recovery, tmp_path)
    _report(f"approve --value MIT ({stores.kind})", swept, problems)
    assert swept >= MIN_BOUNDARIES, f"only {swept} write boundaries swept"
    assert not problems, f"{len(problems)} of {swept} boundaries differ:\n" + "\n".join(problems)


@pytest.mark.parametrize("again", [False, True], ids=["recovered-by-resume", "command-repeated"])
def test_resume_with_more_budget_killed_at_every_write_recovers_exactly(
    stores: Stores, tmp_path: Path, again: bool
) -> None:
    """Recovered by the documented ``converge resume RUN``, which must finish the
    killed leg with the budget that leg was given (its ``run_resumed`` recorded it),
    or by the interrupted command itself, repeated."""
    run = stopped_run(stores, tmp_path, max_cycles=3)
    resume = ["resume", run.run_id, "--max-cycles", "12"]

    def recovery(url: str) -> list[list[str]]:
        return [resume if again else ["resume", run.run_id]]

    swept, problems = sweep(stores, run.url, run.run_id, resume, BUDGET_EXIT, recovery, tmp_path)
    how = "the command again" if again else "converge resume RUN"
    _report(f"resume --max-cycles 12, recovered by {how} ({stores.kind})", swept, problems)
    assert swept >= MIN_BOUNDARIES, f"only {swept} write boundaries swept"
    assert not problems, f"{len(problems)} of {swept} boundaries differ:\n" + "\n".join(problems)


def test_the_kill_hook_kills_a_real_converge_process_and_resume_recovers_it(
    tmp_path: Path,
) -> None:
    """The forked children above stand for real processes: the same kill and recovery
    with ``python -m converge.cli`` and the environment variable (SQLite)."""
    with make_stores("sqlite", tmp_path) as stores:
        run = stopped_run(stores, tmp_path, max_cycles=3)
        resume = ["resume", run.run_id, "--max-cycles", "6"]
        base = stores.copy(run.url)
        assert fork_cli([*resume, "--db", base], tmp_path).returncode == BUDGET_EXIT
        want = snapshot(base, run.run_id)

        cut = run_cli([*resume, "--db", run.url], env={KILL_AFTER_WRITES_ENV: "3"})
        assert cut.killed, cut
        assert snapshot(run.url, run.run_id).status == "crashed"
        again = run_cli([*resume, "--db", run.url])

        assert again.returncode == BUDGET_EXIT, again
        got = snapshot(run.url, run.run_id)
        assert differences(got, want) == []
        assert got.status == "stopped"
