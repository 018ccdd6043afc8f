"""Runs as a service without a broker: submitted runs recorded ``queued`` first and
executed once whatever the duplicates, cancel from another thread or the inbox,
deadlines kept by a keeper while listing only lists, the live run page, and the
server's pool running each run in a worker process (kept for the next runs),
never its own."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest
from sqlalchemy import text
from typer.testing import CliRunner

from audit.people import add_token
from audit.run_queue import cancel_requested, queue_run, request_cancel, take_queued
from audit.store import SqlRunStore
from converge.cli import app
from converge.run_queue import Action
from converge.service import LocalRunPool, execute_run, submit_run
from converge.service.pool_lines import answer_line, message_line
from converge.web import create_app
from engine import RunBusy, RunHeader, StoreError
from tests import livejobs
from tests.browserfixtures import sign_in
from tests.servicefixtures import state, until
from tests.webfixtures import QUORUM_JOB, quorum_job, run_job, served

if TYPE_CHECKING:
    from playwright.sync_api import Page

runner = CliRunner()


class Recorder:
    """A run queue that only records what it was sent, with the run's status then."""

    def __init__(self, store: SqlRunStore) -> None:
        self.store = store
        self.sent: list[tuple[str, Action, str]] = []

    def send(self, run_id: str, action: Action = "run") -> None:
        self.sent.append((run_id, action, self.store.run(run_id).status))


def _permits(n: int) -> None:
    livejobs.STEPS.release(n)


def _drain_permits() -> None:
    while livejobs.STEPS.acquire(blocking=False):
        pass


def test_a_run_is_queued_before_its_message_and_two_deliveries_run_it_once(
    store: SqlRunStore,
) -> None:
    _drain_permits()
    queue = Recorder(store)
    run_id = submit_run(livejobs.ticker_job(), store, queue)
    assert queue.sent == [(run_id, "run", "queued")]
    assert store.verify(run_id).ok  # nothing recorded yet, and that verifies

    _permits(livejobs.LAST)
    first = execute_run(store, run_id)
    again = execute_run(store, run_id)  # the same message delivered twice

    assert first is not None and first.stop_reason.kind_code() == "converged"
    assert again is None
    _permits(livejobs.LAST)
    reference = livejobs.ticker_job().build_engine().run({"seed": [0]})
    row = store.run(run_id)
    assert (row.status, row.facts_root) == ("stopped", reference.facts_root)
    assert [e.kind for e in store.events(run_id)][:2] == ["run_started", "checkpoint_saved"]
    assert store.verify(run_id).ok


def test_a_queued_run_taken_by_a_process_that_died_before_writing_is_taken_again(
    store: SqlRunStore,
) -> None:
    _drain_permits()
    run_id = submit_run(livejobs.ticker_job(), store, Recorder(store))
    take_queued(store, run_id)
    with pytest.raises(RunBusy):
        take_queued(store, run_id)  # held by a live process: nobody else takes it
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    with store.transaction() as conn:
        conn.execute(
            text("UPDATE runs SET pid = :pid WHERE run_id = :run"),
            {"pid": int(dead.stdout), "run": run_id},
        )
        # its lease too: held by the dead process, on this host (audit.writing._lease)
        conn.execute(
            text("UPDATE run_leases SET holder = :holder WHERE run_id = :run"),
            {"holder": f"{socket.gethostname()}/{int(dead.stdout)}/0", "run": run_id},
        )
    store.taken_runs.clear()
    store.leases.drop(run_id)  # this process does not renew it: it "died"

    _permits(livejobs.LAST)
    result = execute_run(store, run_id)

    assert result is not None and result.stop_reason.kind_code() == "converged"
    assert store.verify(run_id).ok


def test_verify_refuses_a_queued_run_that_holds_events(store: SqlRunStore) -> None:
    result = run_job(quorum_job(1), store)
    with store.transaction() as conn:
        conn.execute(
            text("UPDATE runs SET status = 'queued' WHERE run_id = :run"), {"run": result.run_id}
        )

    report = store.verify(result.run_id)

    assert not report.ok and report.reason == "a queued run holds events"


def test_a_run_taken_by_a_worker_that_recorded_nothing_yet_verifies(store: SqlRunStore) -> None:
    """Between the take and the first event (the job loading, or a worker killed
    there: tests/journeys found it) the run holds nothing: ``verify`` says so, and
    still refuses such a run once the ledger named a head of it (its events wiped)."""
    run_id = submit_run(livejobs.ticker_job(), store, Recorder(store))
    take_queued(store, run_id)

    assert store.run(run_id).status == "running"
    assert store.verify(run_id).ok, store.verify(run_id)
    assert all(r.ok for r in store.verify_all()), store.verify_all()

    done = run_job(quorum_job(1), store)
    with store.transaction() as conn:  # a run's chain wiped, its row set back to "taken"
        conn.execute(text("DELETE FROM audit_events WHERE run_id = :r"), {"r": done.run_id})
        conn.execute(text("DELETE FROM gates WHERE run_id = :r"), {"r": done.run_id})
        conn.execute(text("DELETE FROM checkpoints WHERE run_id = :r"), {"r": done.run_id})
        conn.execute(
            text(
                "UPDATE runs SET status = 'running', last_seq = 0, head_hash = :g WHERE run_id = :r"
            ),
            {"g": "0" * 64, "r": done.run_id},
        )
    assert not store.verify(done.run_id).ok


def test_a_cancel_from_the_inbox_stops_a_running_run_at_its_cycle_boundary(
    store: SqlRunStore,
) -> None:
    _drain_permits()
    web = create_app(store)
    token = add_token(store, "alice")
    pool = web.state.run_queue
    assert isinstance(pool, LocalRunPool)
    run_id = submit_run(livejobs.ticker_job(), store, pool)
    _permits(1)
    with served(store, web) as base:
        busy = httpx.post(
            f"{base}/api/runs/nope/cancel", headers={"Authorization": f"Bearer {token}"}
        )
        answer = httpx.post(
            f"{base}/api/runs/{run_id}/cancel", headers={"Authorization": f"Bearer {token}"}
        )
        assert answer.status_code == 202, answer.text
        assert cancel_requested(store, run_id)
        _permits(livejobs.LAST)  # the cycle in flight ends; the cancel stops the run there
    row = store.run(run_id)
    assert busy.status_code == 404
    assert (row.status, row.kind) == ("stopped", "user_cancelled")
    assert 1 <= row.facts_count < 1 + livejobs.LAST  # the ticks before the cancel are kept
    assert not cancel_requested(store, run_id)
    assert store.verify(run_id).ok
    with pytest.raises(RunBusy, match="only a queued or running run"):
        request_cancel(store, run_id, "alice")


def test_listing_gates_only_lists_and_gates_expire_applies_the_deadlines(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "deadline.db")
    job = tmp_path / "quorum.yaml"
    job.write_text(_quorum_text(0.000001), encoding="utf-8")
    paused = runner.invoke(app, ["run", str(job), "--db", db])
    assert paused.exit_code == 10, paused.output

    listed = runner.invoke(app, ["gates", "--json", "--db", db])
    [gate] = json.loads(listed.stdout)
    assert gate["status"] == "pending"  # listing decided nothing
    assert _status(db, gate["run_id"]) == "paused"

    expired = runner.invoke(app, ["gates", "--expire", "--json", "--db", db])
    assert expired.exit_code == 0, expired.output
    [after] = json.loads(expired.stdout)
    assert (after["status"], after["decided_by"]) == ("expired", "timeout")
    assert _status(db, gate["run_id"]) == "stopped"


def _status(db: str, run_id: str) -> str:
    shown = runner.invoke(app, ["show", run_id, "--json", "--db", db])
    return str(json.loads(shown.stdout)["run"]["status"])


def _quorum_text(timeout_s: float) -> str:
    return QUORUM_JOB % (1, f", timeout_s: {timeout_s}, on_timeout: approve")


def test_runs_status_queued_and_watch_follow_a_run_to_its_exit_code(tmp_path: Path) -> None:
    db = str(tmp_path / "watch.db")
    job = tmp_path / "quorum.yaml"
    job.write_text(_quorum_text(600), encoding="utf-8")
    submitted = runner.invoke(
        app, ["submit", str(job), "--db", db, "--broker", "amqp://nobody.invalid//"]
    )
    # an unreachable broker: the run stays recorded, queued, for `worker --recover`
    assert submitted.exit_code == 2
    queued = runner.invoke(app, ["runs", "--status", "queued", "--json", "--db", db])
    [row] = json.loads(queued.stdout)
    assert row["status"] == "queued"
    timed_out = runner.invoke(app, ["watch", row["run_id"], "--timeout", "0", "--db", db])
    assert timed_out.exit_code == 124

    done = subprocess.run(
        [sys.executable, "-m", "converge.cli", "worker", "--run", row["run_id"], "--db", db],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ},
    )
    watched = runner.invoke(app, ["watch", row["run_id"][:8], "--until-pause", "--db", db])

    assert done.returncode == 10, done.stderr  # paused at its gate
    assert watched.exit_code == 10, watched.output
    assert "hitl_gate_pending" in watched.output


def test_the_run_page_follows_a_run_live_until_its_stop(
    tmp_path: Path,
    page: Page,
) -> None:
    from playwright.sync_api import expect

    from audit import open_store

    _drain_permits()
    s = open_store(str(tmp_path / "live.db"))
    try:
        web = create_app(s)
        token = add_token(s, "alice")
        run_id = submit_run(livejobs.ticker_job(), s, web.state.run_queue)
        with served(s, web) as base:
            sign_in(page, base, token)
            page.goto(f"{base}/runs/{run_id}")
            expect(page.locator("#live")).to_be_visible()
            _permits(2)
            expect(page.locator("#run-cycles")).to_have_text("2", timeout=15_000)
            _permits(2)
            expect(page.locator("#run-cycles")).to_have_text("4", timeout=15_000)
            _permits(livejobs.LAST)
            expect(page.locator("#stop-kind")).to_have_text("converged", timeout=15_000)
            expect(page.locator("#run-status")).to_have_text("stopped")
            expect(page.locator("#live")).to_have_count(0)
        assert s.verify(run_id).ok
    finally:
        s.close()


def test_a_header_of_a_queued_run_is_refused_twice(store: SqlRunStore) -> None:
    header = RunHeader("fixed-id-1", "job", None, (), 0.0)
    queue_run(store, header)
    with pytest.raises(Exception, match="already exists"):
        queue_run(store, header)


def test_the_pool_runs_each_run_in_a_reused_worker_process_and_queues_those_beyond_its_size(
    tmp_path: Path,
) -> None:
    from audit import open_store

    _drain_permits()
    s = open_store(str(tmp_path / "pool.db"))
    pool = LocalRunPool(s, max_workers=1)
    try:
        first = submit_run(livejobs.ticker_job(), s, pool)
        second = submit_run(livejobs.ticker_job(), s, pool)
        _permits(1)
        until(lambda: s.run(first).cycles >= 1, what=state(s, first))
        running = s.run(first)
        assert running.status == "running"
        assert running.pid not in (None, os.getpid())  # not this process: a worker's
        assert s.run(second).status == "queued"  # one worker at a time: it waits
        _permits(2 * livejobs.LAST)
        pool.wait(timeout=120)
    finally:
        pool.close()
    rows = [s.run(first), s.run(second)]
    assert [(r.status, r.kind) for r in rows] == [("stopped", "converged")] * 2
    # one worker process, started for the first run and kept: the second waited for
    # no process start of its own
    assert rows[0].pid == rows[1].pid != os.getpid()
    assert all(s.verify(r.run_id).ok for r in rows)
    s.close()


def test_a_pool_process_answers_each_message_and_a_bad_one_does_not_end_it(
    tmp_path: Path,
) -> None:
    from audit import open_store

    db = str(tmp_path / "pool.db")
    open_store(db).close()
    messages = [
        "bogus x\n",
        message_line("run", "no-such-run"),
        message_line("resume", "no-such-run"),
    ]
    done = subprocess.run(
        [sys.executable, "-m", "converge.cli", "worker", "--runs-from-stdin", "--db", db],
        input="".join(messages),
        capture_output=True,
        text=True,
        timeout=60,
    )
    # each message answered with its exit code, the process alive for the next one,
    # and gone at the end of its input
    assert done.stdout.splitlines() == [
        answer_line(None, 2),
        answer_line("no-such-run", 2),
        answer_line("no-such-run", 2),
    ]
    assert done.returncode == 0, done.stderr
    assert "not a run message: 'bogus x'" in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert sum("no-such-run" in line for line in errors) == 2, done.stderr  # log lines aside


def test_a_store_in_memory_cannot_go_to_worker_processes_and_the_app_keeps_it_in_threads() -> None:
    from audit import open_store

    s = open_store(":memory:")
    try:
        with pytest.raises(StoreError, match="in-memory store"):
            LocalRunPool(s)
        pool = create_app(s).state.run_queue
        assert isinstance(pool, LocalRunPool) and pool.in_process
        pool.close()
    finally:
        s.close()
