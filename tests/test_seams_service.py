"""Where the parts meet (issue 53): the inbox, its pool, workers and replay agree,
shown with the real ``converge serve`` (subprocess, its pool of ``converge worker``
processes), real ``converge`` commands, on SQLite and PostgreSQL.

- a process holds a claim on a run only while it executes a leg of it: the server
  decides and comments on the gate of a fork it queued, a process that ran a run to
  its pause decides its next gate after another process resumed it (item 1);
- a gate decided through the server (API, web form) or ``approve --detach`` and
  resumed by a worker records the chain an in-process ``converge approve`` records,
  and ``converge replay`` finds no divergence (item 2);
- a ``converge serve`` stopped (SIGTERM, kill -9) with queued and running runs loses
  none: restarted, it takes them up and they reach the stops of uninterrupted runs;
  ``converge worker --recover`` does the same without a broker (item 6, and the
  table of docs/service.md "When a process dies");
- run ids are checked where they enter, and the pool's messages are JSON lines no
  id can split (item 10).
"""

from __future__ import annotations

import logging
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from audit import open_store
from audit.people import add_token
from audit.run_queue import queue_run
from audit.store import SqlRunStore
from converge.decisions import decide
from converge.jobs import load_job
from converge.service import LocalRunPool, submit_run
from converge.service.pool_lines import answer_line, message_line
from engine import (
    Engine,
    GateDecision,
    InvalidRunId,
    RunHeader,
    check_run_id,
    new_run_id,
)
from tests.faultfixtures import RunSnapshot, differences, opened, run_cli, snapshot
from tests.hitlfixtures import STORES, store_url_for
from tests.realserve import converge_process, decided_over_http, served_cli, stop_within
from tests.servicefixtures import (
    beat_job,
    gated_beat_job,
    kill_quietly,
    reference,
    state,
    stopped,
    suggestors_job,
    until,
    workers_on,
)
from tests.workerfixtures import BROKER

WAIT_S = 45.0
"""No run of these tests takes longer than this to reach its stop on a loaded machine."""


@pytest.fixture(params=STORES)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh store URL of each kind."""
    with store_url_for(request.param, tmp_path) as found:
        yield str(found)


@pytest.fixture
def store(url: str) -> Iterator[SqlRunStore]:
    """The store at ``url``, closed after the test."""
    with opened(url) as s:
        yield s


def _paused(job_file: Path, store: SqlRunStore) -> tuple[str, str]:
    """Run ``job_file`` in this process to its gate: the run id and the gate id."""
    job = load_job(job_file)
    run_id = job.build_engine(store).run(job.spec.initial or None).run_id
    [gate] = [g for g in store.gates(pending=True) if g.run_id == run_id]
    return run_id, gate.gate_id


def _beat_paused(
    store: SqlRunStore, tmp_path: Path, *, steps: int, sleep_ms: int
) -> tuple[str, str]:
    """:func:`gated_beat_job` of ``steps`` beats of ``sleep_ms`` run here to its gate:
    the run id and the gate id."""
    return _paused(gated_beat_job(tmp_path / "gated.yaml", steps=steps, sleep_ms=sleep_ms), store)


Chain = list[tuple[str, int, tuple[str, ...]]]
"""A run's chain without its times and ids: (kind, cycle, a resume's payload keys)."""


def _chain(store: SqlRunStore, run_id: str) -> Chain:
    """The run's chain without its times and ids: each event's kind, cycle and, for a
    ``run_resumed``, its payload's keys."""
    return [
        (e.kind, e.cycle, tuple(sorted(e.payload)) if e.kind == "run_resumed" else ())
        for e in store.events(run_id)
    ]


def _bearer(store: SqlRunStore, name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {add_token(store, name)}"}


def _csrf(page: httpx.Response) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert found is not None, page.text[:500]
    return found.group(1)


def _signed_in(base: str, token: str) -> httpx.Client:
    """A browser's session on the inbox: signed in with ``token`` (CSRF included)."""
    web = httpx.Client(base_url=base, timeout=30)
    login = web.post(
        "/login",
        data={"csrf": _csrf(web.get("/login")), "token": token, "next": "/"},
        follow_redirects=False,
    )
    assert login.status_code == 303, login.text
    return web


# -- item 1: a process holds a claim on a run only while it executes it ------------------------
def test_the_inbox_comments_on_and_decides_the_gate_of_a_fork_it_queued_itself(
    store: SqlRunStore, url: str, tmp_path: Path
) -> None:
    parent, _ = _beat_paused(store, tmp_path, steps=2, sleep_ms=1)
    auth = _bearer(store, "ada")
    with served_cli(url, tmp_path / "serve.log") as served:
        api = httpx.Client(base_url=served.base, headers=auth, timeout=30)
        forked = api.post(f"/api/runs/{parent}/fork", json={"cycle": 0})
        assert forked.status_code == 202, forked.text
        fork = forked.json()["run_id"]
        until(lambda: store.run(fork).status == "paused", timeout=WAIT_S, what=state(store, fork))
        gate = f"{fork}-g1"

        comment = api.post(f"/api/gates/{gate}/comments", json={"text": "MIT, says legal"})
        decision = api.post(f"/api/gates/{gate}/decision", json={"approved": True, "value": "MIT"})

        assert comment.status_code == 201, comment.text
        assert decision.status_code == 202, decision.text
        row = stopped(store, fork, timeout=WAIT_S)
    assert (row.status, row.kind) == ("stopped", "converged"), served.output()[-2000:]
    assert store.get_gate(gate).decided_by == "ada"
    assert [e.payload["text"] for e in store.events(fork, kinds=["gate_comment"])] == [
        "MIT, says legal"
    ]
    assert store.verify(fork).ok


def _two_gates(path: Path) -> Path:
    """Pauses at a gate on the unknown license (cycle 2), then at one on its one step."""
    chain = [f"tests.exactlyoncejobs:{s}" for s in ("scan", "classify", "step")]
    gates = [{"hitl": {"keys": ["license.unknown", "step"]}}]
    return suggestors_job(path, "two-gates", chain, {"seed": [{"steps": 1}]}, gates=gates)


def test_a_process_that_ran_a_run_to_its_pause_decides_its_next_gate_after_another_resumed_it(
    store: SqlRunStore, url: str, tmp_path: Path
) -> None:
    run_id, first = _paused(_two_gates(tmp_path / "two.yaml"), store)
    # another process decides the first gate and resumes the run to its second gate
    other = run_cli(["approve", first, "--by", "bea", "--db", url])
    assert other.returncode == 10, other
    [second] = [g.gate_id for g in store.gates(pending=True)]

    report = decide(store, second, GateDecision.approve(by="ada"))

    assert report.result is not None and report.result.stop_reason.kind_code() == "converged"
    assert store.get_gate(second).decided_by == "ada"
    assert store.verify(run_id).ok


# -- item 2: a decision resumed by a worker reads, and replays, as one resumed in-process ------
def _in_process_chain(job_file: Path, tmp_path: Path) -> Chain:
    """The chain of the job's run decided by ``converge approve`` (Engine.resume here)."""
    s = open_store(str(tmp_path / "in-process.db"))
    try:
        run_id, gate = _paused(job_file, s)
        decide(s, gate, GateDecision.approve(by="carol", value="MIT"))
        return _chain(s, run_id)
    finally:
        s.close()


def _replay_clean(url: str, *runs: str, logs: Path) -> None:
    """``converge replay RUN`` of each run (at once, one process each) exits 0."""
    replays = {r: converge_process("replay", r, "--db", url, log=logs / f"{r}.log") for r in runs}
    for run_id, proc in replays.items():
        assert proc.wait(timeout=WAIT_S) == 0, (logs / f"{run_id}.log").read_text()


def _three_beats_and_their_chain(
    tmp_path: Path,
) -> tuple[Path, list[tuple[str, int, tuple[str, ...]]]]:
    """:func:`gated_beat_job` of 3 beats, and the chain of its run decided in process."""
    job_file = gated_beat_job(tmp_path / "gated.yaml", steps=3, sleep_ms=1)
    return job_file, _in_process_chain(job_file, tmp_path)


def test_gates_decided_through_the_servers_api_and_web_form_replay_as_decided_in_process(
    store: SqlRunStore, url: str, tmp_path: Path
) -> None:
    job_file, want = _three_beats_and_their_chain(tmp_path)
    by_api, api_gate = _paused(job_file, store)
    by_form, form_gate = _paused(job_file, store)
    token = add_token(store, "carol")
    with served_cli(url, tmp_path / "serve.log") as served:
        api = httpx.post(
            f"{served.base}/api/gates/{api_gate}/decision",
            json={"approved": True, "value": "MIT"},
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        web = _signed_in(served.base, token)
        try:
            form = web.post(
                f"/gates/{form_gate}/decision",
                data={
                    "csrf": _csrf(web.get(f"/gates/{form_gate}")),
                    "decision": "approve",
                    "value": "MIT",
                },
                follow_redirects=False,
            )
        finally:
            web.close()
        assert api.status_code == 202, api.text
        assert form.status_code == 303, form.text
        rows = [stopped(store, r, timeout=WAIT_S) for r in (by_api, by_form)]
    assert [r.kind for r in rows] == ["converged", "converged"]
    assert {r.pid for r in rows}.isdisjoint({None, served.proc.pid})  # the pool's
    assert [_chain(store, r) for r in (by_api, by_form)] == [want, want]
    _replay_clean(url, by_api, by_form, logs=tmp_path)


def test_a_gate_decided_with_approve_detach_replays_as_decided_in_process(
    store: SqlRunStore, url: str, tmp_path: Path
) -> None:
    job_file, want = _three_beats_and_their_chain(tmp_path)
    run_id, gate = _paused(job_file, store)

    detached = run_cli(
        ["approve", gate, "--by", "carol", "--value", "MIT", "--detach", "--db", url],
        env={"CONVERGE_BROKER": ""},
    )

    assert detached.returncode == 0, detached
    assert stopped(store, run_id, timeout=WAIT_S).kind == "converged"
    assert _chain(store, run_id) == want
    _replay_clean(url, run_id, logs=tmp_path)


def test_a_run_resumed_with_a_budget_after_its_gate_was_decided_elsewhere_replays_clean(
    store: SqlRunStore, url: str, tmp_path: Path
) -> None:
    # the gate decided without a resume (a decider gone, an expired gate), then the run
    # resumed with more cycles: its chain has a budget's run_resumed before the gate's
    run_id, gate = _beat_paused(store, tmp_path, steps=3, sleep_ms=1)
    store.decide_gate(gate, GateDecision.approve(by="carol", value="MIT"), "approved")

    resumed = run_cli(["resume", run_id, "--max-cycles", "20", "--db", url])

    assert resumed.returncode == 0, resumed
    legs = [e.payload for e in store.events(run_id, kinds=["run_resumed"])]
    assert ["budget" in p for p in legs] == [True, False] and legs[1]["gate_id"] == gate
    _replay_clean(url, run_id, logs=tmp_path)


# -- items 6 and docs: what happens to queued and running runs when a process dies ------------
def _queued(job_file: Path, store: SqlRunStore) -> str:
    """``job_file``'s run recorded ``queued`` as ``converge submit`` records it, and
    sent nowhere (its submitter died before the message, or the broker lost it)."""
    job = load_job(job_file)
    run_id = new_run_id()
    queue_run(store, RunHeader(run_id, job.name, job.record(), (), time.time()))
    return run_id


STOPS = {"SIGTERM": signal.SIGTERM, "kill -9": signal.SIGKILL, "kill -9 of all": signal.SIGKILL}
"""How the server stops; ``kill -9 of all``: its pool's processes too (a machine lost,
a container killed): their runs are left ``running`` by dead writers."""


def _beats_queued(
    store: SqlRunStore, tmp_path: Path, count: int, *, steps: int, sleep_ms: int
) -> tuple[RunSnapshot, list[str]]:
    """:func:`beat_job`'s uninterrupted run, and ``count`` runs of it left queued."""
    job_file = beat_job(tmp_path / "beat.yaml", steps=steps, sleep_ms=sleep_ms)
    return reference(job_file, tmp_path), [_queued(job_file, store) for _ in range(count)]


def test_runs_left_queued_by_a_serve_stopped_as_its_pool_starts_reach_their_stop_once_restarted(
    store: SqlRunStore, url: str, tmp_path: Path
) -> None:
    want, runs = _beats_queued(store, tmp_path, 3, steps=50, sleep_ms=30)
    log = tmp_path / "serve.log"
    with served_cli(url, log, "--pool", "2") as served:
        # it took them up as it started: its pool's processes are starting now
        stop_within(served.proc, signal.SIGTERM, log)
    left = [store.run(r) for r in runs]
    assert all(r.status == "queued" for r in left), [(r.status, r.kind) for r in left]

    with served_cli(url, tmp_path / "again.log", "--pool", "2"):
        rows = [stopped(store, r, timeout=WAIT_S) for r in runs]

    assert [r.kind for r in rows] == ["converged"] * 3
    for run_id in runs:
        assert differences(snapshot(url, run_id), want) == []
        assert store.verify(run_id).ok


@pytest.mark.parametrize("stop", STOPS)
def test_serve_alone_stopped_with_queued_and_running_runs_finishes_them_all_once_restarted(
    store: SqlRunStore, url: str, tmp_path: Path, stop: str
) -> None:
    beat = beat_job(tmp_path / "beat.yaml", steps=40, sleep_ms=30)
    gated = gated_beat_job(tmp_path / "gated.yaml", steps=5, sleep_ms=1)
    want_beat = reference(beat, tmp_path)
    paused, gate = _paused(gated, store)
    queued = [_queued(beat, store) for _ in range(3)]
    auth = _bearer(store, "ada")
    log = tmp_path / "serve.log"
    with served_cli(url, log, "--pool", "2") as served:
        decided_over_http(served.base, gate, auth, {"approved": True, "value": "MIT"})
        # the queued runs went to its pool as it started, the resume after them: stopped
        # as soon as one of them runs, the others are starting or waiting
        until(lambda: any(store.run(r).cycles >= 3 for r in queued), timeout=WAIT_S)
        was = {r: store.run(r) for r in queued}
        if stop == "kill -9 of all":  # the server first: nothing of it acts on what follows
            served.proc.kill()
            for row in was.values():  # before they see it gone (every 0.2 s)
                kill_quietly(row.pid if row.status == "running" else None)
        stop_within(served.proc, STOPS[stop], log)
    statuses = [r.status for r in was.values()]
    assert "running" in statuses and set(statuses) <= {"running", "queued"}, was
    if stop == "kill -9 of all":  # left running by dead writers: crashed
        crashed = ["crashed" if s == "running" else "queued" for s in statuses]
        # a SIGKILLed process is gone once the kernel has reaped it: a loaded host
        # may show its writer alive (running) for a moment
        until(lambda: [store.run(r).status for r in queued] == crashed, timeout=WAIT_S)
    else:  # its pool's processes stop their runs at a cycle boundary and put them back
        until(lambda: all(store.run(r).status == "queued" for r in queued), timeout=WAIT_S)
    assert store.run(paused).status == "paused"  # its gate decided, its resume due

    with served_cli(url, tmp_path / "again.log", "--pool", "2"):
        rows = [stopped(store, r, timeout=WAIT_S) for r in [*queued, paused]]

    assert [r.kind for r in rows] == ["converged"] * 4
    for run_id in queued:
        assert differences(snapshot(url, run_id), want_beat) == []
    for run_id in [*queued, paused]:
        assert store.verify(run_id).ok


def test_converge_worker_recover_without_a_broker_executes_what_no_process_holds(
    store: SqlRunStore, url: str, tmp_path: Path
) -> None:
    want, runs = _beats_queued(store, tmp_path, 2, steps=5, sleep_ms=1)

    recovered = run_cli(["worker", "--recover", "--db", url], env={"CONVERGE_BROKER": ""})

    assert recovered.returncode == 0, recovered
    assert f"recovered 2 runs: {', '.join(runs)}" in recovered.stdout
    for run_id in runs:
        row = store.run(run_id)
        assert (row.status, row.kind) == ("stopped", "converged")
        assert differences(snapshot(url, run_id), want) == []


# -- item 10: run ids checked where they enter; pool messages no id can split -----------------
def test_a_run_id_that_is_no_run_id_is_refused_where_it_enters_naming_the_field(
    store: SqlRunStore, url: str, tmp_path: Path
) -> None:
    job_file = beat_job(tmp_path / "beat.yaml", steps=1, sleep_ms=0)
    job = load_job(job_file)
    bad = f"ghost\nresume {new_run_id()}"

    with pytest.raises(InvalidRunId) as engine_run:
        Engine(store=store).run(run_id=bad)
    with pytest.raises(InvalidRunId) as queued:
        queue_run(store, RunHeader("a run", job.name, job.record(), (), time.time()))
    with pytest.raises(InvalidRunId):
        submit_run(job, store, LocalRunPool(store, in_process=True), run_id="../etc")
    cli = run_cli(["worker", "--run", bad, "--db", url])

    assert engine_run.value.field == "run_id" and engine_run.value.value == bad
    assert "run_id 'ghost\\nresume" in str(engine_run.value)
    assert queued.value.field == "run_id" and "is not a run id" in str(queued.value)
    assert cli.returncode == 2 and "--run 'ghost\\nresume" in cli.message, cli
    assert store.runs() == []  # nothing recorded


def test_every_id_converge_generates_is_a_run_id(store: SqlRunStore, tmp_path: Path) -> None:
    from converge.timetravel import record_fork

    job_file = gated_beat_job(tmp_path / "gated.yaml", steps=1, sleep_ms=0)
    run_id, gate = _paused(job_file, store)
    fork = record_fork(store, run_id, 0)
    given = ["r1", "same-run", "audit.2026-11:a_b"]  # ids people give
    generated = [run_id, gate, fork, *(new_run_id() for _ in range(1000)), *given]
    assert [check_run_id(i) for i in generated] == generated


def test_a_pool_process_reads_one_message_a_line_whatever_the_run_id_holds(
    store: SqlRunStore, url: str, tmp_path: Path
) -> None:
    job_file = beat_job(tmp_path / "beat.yaml", steps=3, sleep_ms=0)
    real = _queued(job_file, store)
    ghost = f"ghost\nrun {real}"  # as a store written before ids were checked could hold

    done = subprocess.run(
        [sys.executable, "-m", "converge.cli", "worker", "--runs-from-stdin", "--db", url],
        input=message_line("run", ghost) + message_line("resume", real),
        capture_output=True,
        text=True,
        timeout=120,
    )

    # the ghost's message is one message (no such run: 2), the real run's the other
    assert done.stdout.splitlines() == [answer_line(ghost, 2), answer_line(real, 0)], done.stderr
    assert store.run(real).kind == "converged"


def test_serves_pool_credits_each_exit_code_to_its_own_run_whatever_the_ids_hold(
    store: SqlRunStore, url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    gated = gated_beat_job(tmp_path / "gated.yaml", steps=2, sleep_ms=0)
    decided, gate = _paused(gated, store)
    store.decide_gate(gate, GateDecision.approve(by="ada", value="MIT"), "approved")
    real = _queued(beat_job(tmp_path / "beat.yaml", steps=3, sleep_ms=0), store)
    pool = LocalRunPool(store, 1)  # one process: each message after the other
    try:
        with caplog.at_level(logging.ERROR, logger="converge.service"):
            pool.send(f"ghost\nresume {decided}", "run")
            pool.send(real, "run")
            pool.wait(timeout=120)
    finally:
        pool.close()
    ended = [r.args for r in caplog.records if r.name == "converge.service"]
    # the ghost failed (2), credited to it; nothing resumed the decided run
    assert ended == [(f"ghost\nresume {decided}", "run", 2)]
    assert store.run(decided).status == "paused"
    assert store.run(real).kind == "converged"


def test_a_pool_process_killed_under_a_running_serve_has_its_run_finished_by_another(
    store: SqlRunStore, url: str, tmp_path: Path
) -> None:
    job_file = beat_job(tmp_path / "beat.yaml", steps=30, sleep_ms=30)
    want = reference(job_file, tmp_path)
    run_id = _queued(job_file, store)
    with served_cli(url, tmp_path / "serve.log", "--pool", "2") as served:
        until(lambda: store.run(run_id).cycles >= 3, timeout=WAIT_S, what=state(store, run_id))
        holder = store.run(run_id).pid
        assert holder not in (None, served.proc.pid)

        kill_quietly(holder)

        # its keeper finds the run's writer gone and sends it to another process
        row = stopped(store, run_id, timeout=WAIT_S)
    assert row.kind == "converged" and row.pid != holder
    assert "crash" in [e.payload.get("from") for e in store.events(run_id, kinds=["run_resumed"])]
    assert differences(snapshot(url, run_id), want) == []
    assert store.verify(run_id).ok


def test_serve_on_a_broker_has_a_run_of_a_worker_killed_mid_leg_finished_by_another(
    store: SqlRunStore, url: str, tmp_path: Path
) -> None:
    run_id, gate = _beat_paused(store, tmp_path, steps=40, sleep_ms=30)
    auth = _bearer(store, "ada")
    with (
        workers_on(url, 2) as workers,
        served_cli(url, tmp_path / "serve.log", "--broker", BROKER, "--queue", workers.queue) as s,
    ):
        decided_over_http(s.base, gate, auth, {"approved": True, "value": "MIT"})
        until(lambda: store.run(run_id).cycles >= 5, timeout=WAIT_S, what=state(store, run_id))
        holder = store.run(run_id).pid
        assert holder is not None

        workers.kill_node_running(holder)  # the whole node: its message goes back

        row = stopped(store, run_id, timeout=WAIT_S)
    assert row.kind == "converged" and row.pid != holder
    beats = [f.content["n"] for f in store.facts(run_id) if f.key == "beat"]
    assert beats == list(range(40))  # each once, in order
    assert store.verify(run_id).ok
