"""Racing pairs of the commands that continue a run: exactly one continues (issue 28).

Trials (50 each, ``$EXACTLY_ONCE_TRIALS`` to change it), on SQLite and PostgreSQL:

- two ``converge resume RUN --max-cycles M`` on a run stopped by its cycle budget;
- ``converge resume RUN`` against ``converge gates`` on a run paused at a gate whose
  deadline has passed (its ``expires_at`` moved into the past in the store): both
  apply the gate's ``on_timeout`` decision (compare-and-set) and resume the run;
- ``converge approve GATE --by alice --value MIT`` against ``converge resume RUN``
  on a paused run.

Both commands of a trial are children forked from this process (converge already
imported) released by one barrier, so they start within the same millisecond, on
the trial's own copy of the prepared store; the leg they race for is 100 cycles
long, so each claims while the other may still be running. In every trial: the run
is continued once (one leg of ``run_resumed`` events), the other command is refused clearly (exit
2 and an error saying why; ``converge gates`` only lists gates, exit 0), nothing
crashes, no fact id is recorded twice, and the facts (ids and contents), facts root
and stop equal those of one uninterrupted continuation.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.faultfixtures import (
    BUDGET_EXIT,
    CliOutcome,
    RunSnapshot,
    Stores,
    differences,
    expire_gate,
    fork_cli,
    fork_race,
    make_stores,
    paused_run,
    snapshot,
    stopped_run,
)

TRIALS = int(os.environ.get("EXACTLY_ONCE_TRIALS", "50"))
LEG = 100
"""Cycles of the continuation raced for."""
BAD_INPUT = 2
REFUSALS = (
    "already",
    "busy",
    "is running",
    "another process",
    "waits on gate",
    "superseded",
    "claimed",
)
"""What a refusal says (RunBusy, already finished / decided, a gate still pending)."""


@pytest.fixture(params=["sqlite", "postgresql"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stores]:
    """Stores of one kind for this test: fresh ones and copies, removed afterwards."""
    with make_stores(request.param, tmp_path) as made:
        yield made


@dataclass
class Race:
    """Two commands (``--db`` added per trial) racing on copies of ``template``."""

    template: str
    run_id: str
    commands: list[list[str]]
    winner_exit: int
    lists: set[int] = field(default_factory=set)
    """Commands that only list gates when they lose (``converge gates``: exit 0)."""


def _shape(message: str, run_id: str) -> str:
    """A loser's message with its ids, times and numbers replaced, to count kinds."""
    text = message.replace(run_id, "RUN")
    text = re.sub(r"\b[0-9a-f]{64}\b", "HASH", text)
    text = re.sub(r"\S*(store\d+\.db|converge_eo_[0-9a-f]{12})\S*", "STORE", text)
    text = re.sub(r"\d{4}-\d\d-\d\d[T ][\d:]+Z?", "TIME", text)
    return re.sub(r"\b\d+\b", "N", text)


def judge(
    race: Race, outs: list[CliOutcome], got: RunSnapshot, want: RunSnapshot, start: int
) -> tuple[list[str], list[str]]:
    """What is wrong with one trial, and what each command that lost said."""
    found: list[str] = []
    said: list[str] = []
    for args, out in zip(race.commands, outs, strict=True):
        if out.killed or out.crashed:
            found.append(f"{args[0]} crashed: {out}")
    legs = got.legs_after(start)
    wrong = differences(got, want)
    if legs != 1:
        # facts still right: a leg that claimed the run after the other finished, did nothing
        why = "" if wrong or legs == 0 else ", an extra one that added no fact"
        found.append(f"{legs} continuations (run_resumed legs{why})")
    found += wrong
    holders = [k for k, out in enumerate(outs) if out.pid == got.pid]
    if not holders:
        found.append(f"the run's writer pid {got.pid} is neither command")
    for k, (args, out) in enumerate(zip(race.commands, outs, strict=True)):
        if k in holders:
            if out.returncode != race.winner_exit:
                found.append(f"the {args[0]} that continued: {out}")
        elif k in race.lists and out.returncode == 0:
            said.append(f"{args[0]}: listed the gates (exit 0)")
        elif out.returncode == BAD_INPUT and any(p in out.message.lower() for p in REFUSALS):
            said.append(f"{args[0]}: exit 2: {_shape(out.message, race.run_id)}")
        else:
            found.append(f"the other {args[0]} was not refused: {out}")
    return found, said


@dataclass
class Tally:
    """What the trials showed: wrong trials, and how often each problem and each
    loser's answer came up (ids, times and numbers replaced)."""

    wrong: list[str] = field(default_factory=list)
    problems: Counter[str] = field(default_factory=Counter)
    losers: Counter[str] = field(default_factory=Counter)


def run_trials(stores: Stores, race: Race, workdir: Path) -> Tally:
    """Race the commands ``TRIALS`` times, each on its own copy of the store."""
    base = stores.copy(race.template)
    alone = fork_cli([*race.commands[0], "--db", base], workdir)
    assert alone.returncode == race.winner_exit, alone
    want = snapshot(base, race.run_id)
    assert not want.duplicates and want.legs_after(0) == 1, want
    stores.discard(base)
    start = snapshot(race.template, race.run_id).last_seq
    tally = Tally()
    for trial in range(1, TRIALS + 1):
        url = stores.copy(race.template)
        try:
            outs = fork_race([[*c, "--db", url] for c in race.commands], workdir / "trials")
            found, said = judge(race, outs, snapshot(url, race.run_id), want, start)
        finally:
            stores.discard(url)
        tally.losers.update(said)
        tally.problems.update(_shape(f, race.run_id) for f in found)
        if found:
            tally.wrong.append(f"trial {trial}: " + "; ".join(found))
    return tally


def _conclude(what: str, stores: Stores, tally: Tally) -> None:
    print(f"\n{what} ({stores.kind}): {TRIALS - len(tally.wrong)} of {TRIALS} trials correct")
    for said, n in tally.losers.most_common():
        print(f"  {n} x the loser {said}")
    for problem, n in tally.problems.most_common():
        print(f"  {n} x PROBLEM {problem}")
    kinds = "; ".join(f"{n} x {p}" for p, n in tally.problems.most_common())
    assert not tally.wrong, f"{len(tally.wrong)} of {TRIALS} trials wrong: {kinds}"


def test_two_resumes_of_a_budget_stopped_run_continue_it_once(
    stores: Stores, tmp_path: Path
) -> None:
    run = stopped_run(stores, tmp_path, max_cycles=3)
    resume = ["resume", run.run_id, "--max-cycles", str(run.cycles + LEG)]
    race = Race(run.url, run.run_id, [resume, resume], BUDGET_EXIT)

    _conclude("two resumes", stores, run_trials(stores, race, tmp_path))


def test_resume_against_the_expiry_of_a_gate_continues_the_run_once(
    stores: Stores, tmp_path: Path
) -> None:
    run = paused_run(stores, tmp_path, steps=LEG, timeout_s=3600)
    expire_gate(run.url, run.gate_id)
    # `converge gates --expire` (cron's) applies the expiry (on_timeout: approve)
    # and resumes the run
    expiry = ["gates", "--expire"]
    race = Race(run.url, run.run_id, [expiry, ["resume", run.run_id]], 0, lists={0})

    _conclude("resume against expiry", stores, run_trials(stores, race, tmp_path))


def test_approve_against_resume_of_a_paused_run_continues_it_once(
    stores: Stores, tmp_path: Path
) -> None:
    run = paused_run(stores, tmp_path, steps=LEG)
    approve = ["approve", run.gate_id, "--by", "alice", "--value", "MIT"]
    race = Race(run.url, run.run_id, [approve, ["resume", run.run_id]], 0)

    _conclude("approve against resume", stores, run_trials(stores, race, tmp_path))
