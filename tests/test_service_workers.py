"""Runs as a service on real ``converge worker`` processes (issue 22).

Runs are submitted to a queue and executed by workers over the test's store
(SQLite and PostgreSQL for the 100 runs and the kill trials): 100 runs on 4
workers end as in-process runs do; workers killed with -9 mid-run and mid-resume
lose and duplicate nothing; a cancel stops a running run within a second; an
approval through the HTTP API answers 202 without waiting for the run's next leg
(in the server's own pool, or on a worker); ``converge submit`` without a broker,
and ``converge worker --recover``. Each test has its own queue and store.
RabbitMQ and Redis (``$CONVERGE_TEST_BROKER``, ``$CONVERGE_TEST_REDIS``) and
PostgreSQL (``$CONVERGE_TEST_PG_URL``) are required when ``$CI`` is set.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import httpx
import pytest

from audit.people import add_token
from audit.run_queue import queue_run, request_cancel
from audit.store import SqlRunStore
from converge.jobs import load_job
from converge.service import submit_run
from converge.web import create_app
from converge.workers import CeleryRunQueue
from engine import GateDecision, RunHeader
from tests import servicejobs
from tests.faultfixtures import (
    RunSnapshot,
    Stores,
    differences,
    gated_job,
    make_stores,
    opened,
    run_cli,
    snapshot,
    ticking_job,
)
from tests.realserve import decided_over_http
from tests.servicefixtures import (
    beat_job,
    chain_job,
    gated_beat_job,
    held_job,
    kill_quietly,
    reference,
    reference_resumed,
    state,
    stopped,
    until,
    workers_on,
)
from tests.webfixtures import served
from tests.workerfixtures import BROKER, Workers

RUNS = 100
WORKERS = 4
KILL_TRIALS = int(os.environ.get("SERVICE_KILL_TRIALS", "20"))
"""Kill -9 trials per store kind (``$SERVICE_KILL_TRIALS``)."""
KILL_SEED = int(os.environ.get("SERVICE_KILL_SEED", "22"))
"""Seeds the kill points (``$SERVICE_KILL_SEED`` replays a failing sequence)."""
NODE_KILL_EVERY = 3
"""Every third trial kills the whole worker node, the others its pool process."""
CANCEL_WITHIN_S = 1.0
STOP_WITHIN_S = 10.0


@pytest.fixture(params=["sqlite", "postgresql"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stores]:
    """Stores of one kind for this test, removed afterwards."""
    with make_stores(request.param, tmp_path) as made:
        yield made


@contextmanager
def run_queue(workers: Workers) -> Iterator[CeleryRunQueue]:
    queue = CeleryRunQueue(BROKER, workers.queue)
    try:
        yield queue
    finally:
        queue.close()


def _all_verify(store: SqlRunStore) -> None:
    bad = [f"{r.run_id}: {r}" for r in store.verify_all() if not r.ok]
    assert bad == [], bad[:3]


def _as_if_uninterrupted(store: SqlRunStore, url: str, run_id: str, want: RunSnapshot) -> None:
    """The run of ``store`` (at ``url``) ended as ``want`` (its uninterrupted run) did,
    and every run of the store verifies."""
    assert differences(snapshot(url, run_id), want) == []
    _all_verify(store)


def _chain_and_its_reference(tmp_path: Path, db: str) -> tuple[str, Path, RunSnapshot]:
    """The URL of a SQLite store ``db`` in ``tmp_path`` (not created yet),
    :func:`chain_job` written in ``tmp_path``, and the job's uninterrupted run."""
    job = chain_job(tmp_path / "chain.yaml")
    return str(tmp_path / db), job, reference(job, tmp_path)


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


# -- 100 runs on 4 workers ------------------------------------------------------------------
def test_100_runs_submitted_to_4_workers_reach_the_stops_and_facts_of_in_process_runs(
    stores: Stores, tmp_path: Path
) -> None:
    jobs = [
        chain_job(tmp_path / "chain.yaml"),  # converges in 4 cycles
        ticking_job(tmp_path / "ticking.yaml", max_cycles=4),  # stopped by its budget
        gated_job(tmp_path / "gated.yaml", steps=3),  # pauses at its gate
    ]
    want = {job: reference(job, tmp_path) for job in jobs}
    assert sorted(str(w.kind) for w in want.values()) == [
        "converged",
        "cycle_budget_exhausted",
        "hitl_gate_pending",
    ]
    url = stores.fresh()
    with opened(url) as store, workers_on(url, WORKERS) as workers:
        with run_queue(workers) as queue:
            loaded = [load_job(job) for job in jobs]
            submitted = [
                (jobs[i % len(jobs)], submit_run(loaded[i % len(jobs)], store, queue))
                for i in range(RUNS)
            ]
        rows = [stopped(store, run_id) for _, run_id in submitted]
        for job, run_id in submitted:
            assert differences(snapshot(url, run_id), want[job]) == [], run_id
        # every worker took its share: each run was written by one of 4 processes
        assert len({row.pid for row in rows}) == WORKERS
        _all_verify(store)


# -- kill -9 mid-run and mid-resume -----------------------------------------------------
def _kill_when(
    store: SqlRunStore, workers: Workers, run_id: str, at_seq: int, whole_node: bool
) -> bool:
    """Wait until a worker runs ``run_id`` and its chain reaches ``at_seq``, then kill
    -9 its pool process (or its whole node, restarted in the background); True when
    the run was still running at the kill."""

    def held_by_a_worker() -> bool:
        row = store.run(run_id)
        if row.status == "stopped":  # too late: the leg is done
            return True
        return row.status == "running" and row.pid != os.getpid() and row.last_seq >= at_seq

    until(held_by_a_worker, what=state(store, run_id))
    row = store.run(run_id)
    if row.status != "running" or row.pid is None:
        return False
    if whole_node:
        workers.respawn(workers.kill_node_running(row.pid), wait=False)
    else:
        kill_quietly(row.pid)
    return True


def _trial_differences(got: RunSnapshot, want: RunSnapshot) -> list[str]:
    found = differences(got, want)
    if got.status != "stopped":
        found.append(f"status {got.status}")
    return found


def test_kill_9_of_workers_mid_run_and_mid_resume_loses_and_duplicates_nothing(
    stores: Stores, tmp_path: Path
) -> None:
    running = beat_job(tmp_path / "beat.yaml", steps=60, sleep_ms=20)
    gated = gated_beat_job(tmp_path / "gated.yaml", steps=60, sleep_ms=20)
    want_run, want_resume = reference(running, tmp_path), reference_resumed(gated, tmp_path)
    assert (want_run.kind, want_resume.kind) == ("converged", "converged")
    rng = random.Random(KILL_SEED)
    url = stores.fresh()
    failures: list[str] = []
    mid_run = 0
    with opened(url) as store, workers_on(url, 2) as workers, run_queue(workers) as queue:
        for trial in range(KILL_TRIALS):
            whole_node = trial % NODE_KILL_EVERY == NODE_KILL_EVERY - 1
            if whole_node:
                workers.wait_ready()  # the node killed last time is back
            if trial % 2 == 0:  # mid-run: a submitted run
                want = want_run
                run_id = submit_run(load_job(running), store, queue)
                first = 0
            else:  # mid-resume: a run paused here, approved, resumed on a worker
                want = want_resume
                job = load_job(gated)
                run_id = job.build_engine(store).run(job.spec.initial or None).run_id
                [gate] = store.gates(pending=True)
                first = store.run(run_id).last_seq
                decide_on(store, gate.gate_id, queue)
            at_seq = rng.randrange(first, first + (want.last_seq - first) * 9 // 10)
            mid_run += _kill_when(store, workers, run_id, at_seq, whole_node)
            stopped(store, run_id)
            found = _trial_differences(snapshot(url, run_id), want)
            if found:
                where = "node" if whole_node else "pool process"
                failures.append(f"trial {trial} (kill {where} at seq {at_seq}): {found}")
        _all_verify(store)
    assert failures == []
    # most kills hit a run in the middle of its leg (not one that had finished)
    assert mid_run >= KILL_TRIALS // 2, mid_run


def decide_on(store: SqlRunStore, gate_id: str, queue: CeleryRunQueue) -> None:
    """Approve ``gate_id``; its run's resume goes to ``queue``."""
    from converge.decisions import decide

    report = decide(store, gate_id, GateDecision.approve(by="trial"), queue=queue)
    assert report.still_needed == 0 and report.result is None


# -- SIGTERM mid-run -------------------------------------------------------------------------
@pytest.mark.parametrize("stop", ["SIGTERM", "kill -9"])
def test_a_worker_stopped_mid_run_exits_within_10_s_and_the_other_finishes_its_run_identically(
    stores: Stores, tmp_path: Path, stop: str
) -> None:
    job_file = beat_job(tmp_path / "beat.yaml", steps=60, sleep_ms=50)
    want = reference(job_file, tmp_path)
    url = stores.fresh()
    with opened(url) as store, workers_on(url, 2) as workers:
        with run_queue(workers) as queue:
            run_id = submit_run(load_job(job_file), store, queue)
        until(partial(_cycles_done, store, run_id, 3), what=state(store, run_id))
        pid = store.run(run_id).pid
        assert pid is not None
        node = next(i for i, p in enumerate(workers.procs) if p.pid == os.getpgid(pid))
        if stop == "SIGTERM":  # to the node's main process only, as `kill PID` does
            workers.procs[node].send_signal(signal.SIGTERM)
            workers.procs[node].wait(timeout=STOP_WITHIN_S)  # TimeoutExpired: too slow
        else:
            workers.kill_node_running(pid)

        until(lambda: store.run(run_id).kind == "converged", what=state(store, run_id))
        assert store.run(run_id).pid != pid  # the other worker finished it
        legs = [str(e.payload) for e in store.events(run_id, kinds=["run_stopped"])]
        # SIGTERM: cancelled at a cycle boundary, then resumed; kill -9: recovered
        assert ("user_cancelled" in legs[0]) == (stop == "SIGTERM"), legs
        _as_if_uninterrupted(store, url, run_id, want)


# -- cancel -----------------------------------------------------------------------------------
def _cancelled(store: SqlRunStore, run_id: str) -> tuple[float, int]:
    """The cancelled run's ``run_stopped`` time (unix seconds) and beats kept; checks
    that it ended UserCancelled with every fact it promoted, in order."""
    row = stopped(store, run_id, timeout=30)
    assert row.kind == "user_cancelled", row.kind
    [event] = store.events(run_id, kinds=["run_stopped"])
    kept = store.facts(run_id)
    beats = [f.content["n"] for f in kept if f.key == "beat"]
    assert len(kept) == row.facts_count and beats == list(range(len(beats)))
    return event.ts, len(beats)


def _cycles_done(store: SqlRunStore, run_id: str, cycles: int) -> bool:
    return store.run(run_id).cycles >= cycles


def test_a_cancel_stops_a_running_run_on_a_worker_within_a_second_with_its_facts_kept(
    tmp_path: Path,
) -> None:
    url = str(tmp_path / "cancel.db")
    job = load_job(beat_job(tmp_path / "slow.yaml", steps=400, sleep_ms=50))
    with opened(url) as store, workers_on(url, 1, concurrency=2) as workers:
        with run_queue(workers) as queue:
            timed, by_cli = submit_run(job, store, queue), submit_run(job, store, queue)
        for run_id in (timed, by_cli):
            until(partial(_cycles_done, store, run_id, 3), what=state(store, run_id))
        asked = time.time()
        assert request_cancel(store, timed, "carol") == "running"
        at, beats = _cancelled(store, timed)
        assert at - asked < CANCEL_WITHIN_S, at - asked
        assert beats >= 2
        cancelled = run_cli(["cancel", by_cli, "--db", url, "--by", "dave"])
        assert cancelled.returncode == 0, cancelled
        assert f"cancel requested: run {by_cli} (running)" in cancelled.stdout
        assert _cancelled(store, by_cli)[1] >= 2
        _all_verify(store)


# -- approvals answer 202 at once ---------------------------------------------------------------
def test_without_a_broker_the_api_answers_202_before_the_next_leg_runs_in_the_servers_pool(
    tmp_path: Path,
) -> None:
    servicejobs.RELEASE.clear()
    servicejobs.HELD.clear()
    job = load_job(held_job(tmp_path / "held.yaml"))
    with opened(str(tmp_path / "pool.db")) as store:
        run_id = job.build_engine(store).run(job.spec.initial or None).run_id
        [gate] = store.gates(pending=True)
        token = add_token(store, "alice")
        app = create_app(store)  # no run_queue: a LocalRunPool of this process
        try:
            with served(store, app) as base:
                try:
                    answer = httpx.post(
                        f"{base}/api/gates/{gate.gate_id}/decision",
                        json={"approved": True, "reason": "fine"},
                        headers=_bearer(token),
                        timeout=30,
                    )
                    # answered while the leg cannot finish: it waits for RELEASE, set below
                    assert not servicejobs.RELEASE.is_set()
                    assert answer.status_code == 202, answer.text
                    body = answer.json()
                    assert (body["status"], body["decided_by"]) == ("approved", "alice")
                    assert body["run"]["url"] == f"/runs/{run_id}"
                    assert servicejobs.HELD.wait(30), "the next leg never started in the pool"
                    assert store.run(run_id).status == "running"
                finally:
                    servicejobs.RELEASE.set()
                app.state.run_queue.wait(60)
        finally:
            app.state.run_queue.close()
        row = store.run(run_id)
        assert (row.status, row.kind) == ("stopped", "converged")
        assert [f.key for f in store.facts(run_id)][-1] == "released"
        _all_verify(store)


def test_an_approval_through_the_api_answers_202_and_the_run_resumes_on_a_worker(
    stores: Stores, tmp_path: Path
) -> None:
    gated = gated_beat_job(tmp_path / "gated.yaml", steps=20, sleep_ms=20)
    want = reference_resumed(gated, tmp_path)
    url = stores.fresh()
    with opened(url) as store, workers_on(url, 1) as workers, run_queue(workers) as queue:
        job = load_job(gated)
        run_id = job.build_engine(store).run(job.spec.initial or None).run_id
        [gate] = store.gates(pending=True)
        token = add_token(store, "bob")
        with served(store, create_app(store, run_queue=queue)) as base:
            answer = decided_over_http(base, gate.gate_id, _bearer(token), {"approved": True})
        assert answer.json()["run"]["api_url"] == f"/api/runs/{run_id}"
        row = stopped(store, run_id)
        assert row.pid != os.getpid()  # resumed by the worker, not here
        _as_if_uninterrupted(store, url, run_id, want)


# -- no broker: submit; and recovery of what no worker got ------------------------------------
def test_converge_submit_without_a_broker_runs_in_a_detached_worker_process(
    tmp_path: Path,
) -> None:
    url, job, want = _chain_and_its_reference(tmp_path, "detached.db")
    submitted = run_cli(["submit", str(job), "--db", url], env={"CONVERGE_BROKER": ""})
    assert submitted.returncode == 0, submitted
    run_id = submitted.stdout.strip()
    with opened(url) as store:
        try:
            row = stopped(store, run_id)
        finally:
            kill_quietly(store.run(run_id).pid)  # it exits by itself when all is well
        assert row.pid not in (None, os.getpid())
        _as_if_uninterrupted(store, url, run_id, want)


def test_converge_worker_recover_sends_a_queued_run_no_worker_got_to_a_worker(
    tmp_path: Path,
) -> None:
    url, job_file, want = _chain_and_its_reference(tmp_path, "recover.db")
    job = load_job(job_file)
    with opened(url) as store, workers_on(url, 1) as workers:
        # recorded queued, its message lost (never sent)
        queue_run(store, RunHeader("lost-run", job.name, job.record(), (), time.time()))
        assert store.run("lost-run").status == "queued"
        recovered = run_cli(
            ["worker", "--recover", "--broker", BROKER, "--queue", workers.queue, "--db", url]
        )
        assert recovered.returncode == 0, recovered
        assert "sent again 1 run: lost-run" in recovered.stdout
        row = stopped(store, "lost-run")
        assert row.pid not in (None, os.getpid())
        _as_if_uninterrupted(store, url, "lost-run", want)
