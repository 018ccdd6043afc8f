"""The ledger's sequencer killed -9 (issue 31): in the middle of a pass, while it leads the
store's passes, or in a writer with heads pending; nothing is lost, the next pass
(or the next leader) integrates what was left, and every run verifies. On
PostgreSQL (required under CI) and SQLite.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import pytest

from audit import open_store
from audit.ledger import (
    NOT_YET_INTEGRATED,
    LedgerSequencer,
    integrate,
    pending_count,
)
from audit.testing import KILL_AFTER_WRITES_ENV
from audit.writing import LEDGER_DELAY_ENV
from engine import Budget, Engine
from tests.ledgerfixtures import (
    ROOT,
    assert_ledger_in_order,
    chain_hash,
    delayed,
    ledger_rows,
    no_end_pass,
    pg_url,
    recorded_heads,
    run,
    tick,
    url,
)

__all__ = ["pg_url", "recorded_heads", "url"]  # fixtures, used by name

KILL_IN_PASS = """
import os, signal, sys
import audit.ledger._integration as seq
from audit import open_store

original = seq._clear

def clear_then_die(conn, rows):
    original(conn, rows)  # the ledger rows are in, the pending ones deleted: not committed
    os.kill(os.getpid(), signal.SIGKILL)

seq._clear = clear_then_die
seq.integrate(open_store(sys.argv[1]))
"""


def test_a_sequencer_killed_in_the_middle_of_a_pass_loses_nothing(
    url: str, monkeypatch: pytest.MonkeyPatch, recorded_heads: list[tuple[str, int, str]]
) -> None:
    store = delayed(url)
    with no_end_pass(monkeypatch):
        for i in range(3):
            run(store, f"r{i}")
    waiting, size = pending_count(store), len(ledger_rows(store))
    assert waiting == len(recorded_heads) and size == 0
    killed = subprocess.run(
        [sys.executable, "-c", KILL_IN_PASS, url], cwd=ROOT, capture_output=True, timeout=120
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()
    assert (pending_count(store), len(ledger_rows(store))) == (waiting, size)
    assert all(r.ok for r in store.verify_all())  # pending, within the bound
    assert integrate(store) == waiting
    assert_ledger_in_order(store, recorded_heads)
    store.close()


LEADER = """
import os, signal, sys
from audit import open_store
from audit.ledger import LedgerSequencer

sequencer = LedgerSequencer(open_store(sys.argv[1]))
assert sequencer.leading()
print("leading", flush=True)
sys.stdin.readline()
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_leader_killed_is_replaced_and_its_pending_heads_integrated(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = delayed(pg_url)
    follower = LedgerSequencer(store, follow_s=0)
    leader = subprocess.Popen(
        [sys.executable, "-c", LEADER, pg_url], cwd=ROOT, stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert leader.stdout is not None and leader.stdout.readline().strip() == "leading"
    with no_end_pass(monkeypatch):
        run(store, "orphan")
    assert not follower.leading() and follower.tick() == 0
    waiting = pending_count(store)
    assert waiting > 0
    assert leader.communicate("die\n", timeout=60)[0] == ""
    assert leader.returncode == -signal.SIGKILL
    # the server drops the killed session, its advisory lock with it (a poll, not a sleep:
    # the assertions after it do not depend on how long that takes)
    for _ in range(400):
        if follower.leading():
            break
        threading.Event().wait(0.025)
    assert follower.tick() == waiting and pending_count(store) == 0
    assert all(r.ok and r.reason is None for r in store.verify_all())
    follower.stop()
    store.close()


WRITER = """
import sys
from audit import open_store
from engine import Budget, Engine
from tests.ledgerfixtures import tick

store = open_store(sys.argv[1])
engine = Engine(budget=Budget(max_cycles=40), store=store, checkpoint_every=3)
engine.register(tick).run({"n": [0]}, run_id="w")
"""


def test_a_writer_killed_with_heads_pending_loses_nothing(url: str) -> None:
    env = {**os.environ, LEDGER_DELAY_ENV: "3600000", KILL_AFTER_WRITES_ENV: "12"}
    killed = subprocess.run(
        [sys.executable, "-c", WRITER, url], cwd=ROOT, env=env, capture_output=True, timeout=120
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()
    store = open_store(url)  # SQLite: inline, PostgreSQL: pending with the default delay
    left = pending_count(store)
    assert left > 0
    report = store.verify("w")
    assert report.ok and NOT_YET_INTEGRATED in (report.reason or "")
    # the next process to commit integrates what the killed one left, before its own heads
    Engine(store=store).register(tick).resume_run("w", Budget(max_cycles=45))
    assert pending_count(store) == 0
    rows = [r for r in ledger_rows(store) if r[1] == "w"]
    seqs = [r[2] for r in rows]
    assert seqs == sorted(set(seqs)) and seqs[-1] == store.run("w").last_seq
    assert all(chain_hash(store, "w", r[2]) == r[3] for r in rows if r[2])
    assert all(r.ok and r.reason is None for r in store.verify_all())
    store.close()


LEADER_DIES_IN_PASS = """
import os, signal, sys
import audit.ledger._integration as passes
from audit import open_store
from audit.ledger import LedgerSequencer

point = sys.argv[2]
original = getattr(passes, point)

def then_die(*args, **kwargs):
    original(*args, **kwargs)  # this step of the pass is done, its transaction open
    os.kill(os.getpid(), signal.SIGKILL)

setattr(passes, point, then_die)
sequencer = LedgerSequencer(open_store(sys.argv[1]), follow_s=0)
assert sequencer.leading()
print("leading", flush=True)
sys.stdin.readline()
sequencer.tick()
print("survived", flush=True)
"""

KILL_POINTS = ("_lock_head", "_forward", "_clear", "_append", "_pass")
"""The steps of a pass (audit.ledger._integration) after which the leader dies."""

TRIALS = 10


def test_a_leader_killed_mid_pass_ten_times_loses_no_head(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, recorded_heads: list[tuple[str, int, str]]
) -> None:
    store = delayed(pg_url)
    for trial in range(TRIALS):
        point = KILL_POINTS[trial % len(KILL_POINTS)]
        with no_end_pass(monkeypatch):
            for i in range(3):
                run(store, f"t{trial}-{i}", cycles=3 + trial % 4)
        waiting = pending_count(store)
        leader = subprocess.Popen(
            [sys.executable, "-c", LEADER_DIES_IN_PASS, pg_url, point], cwd=ROOT,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert leader.stdout is not None and leader.stdout.readline().strip() == "leading"
        follower = LedgerSequencer(store, follow_s=0)
        assert not follower.leading()

        out, _ = leader.communicate("go\n", timeout=60)

        assert leader.returncode == -signal.SIGKILL and "survived" not in out, point
        assert pending_count(store) == waiting, f"trial {trial} ({point}): a head lost"
        for _ in range(400):  # the server drops the killed session and its lock
            if follower.leading():
                break
            threading.Event().wait(0.025)
        assert follower.tick() == waiting and pending_count(store) == 0, point
        follower.resign()  # the next trial's leader takes the lead
    assert_ledger_in_order(store, recorded_heads)
    store.close()
