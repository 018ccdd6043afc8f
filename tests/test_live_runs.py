"""GET /api/runs/{id}/events: a run's events as Server-Sent Events, as they are committed."""

from __future__ import annotations

import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from audit import SqlRunStore
from audit.people import add_token
from converge.web import create_app
from converge.web.feeds import LiveRuns
from converge.web.serving import GRACEFUL_SHUTDOWN_S
from engine import GateDecision
from tests.browserfixtures import sign_in
from tests.faultfixtures import opened
from tests.hitlfixtures import INITIAL, make_engine
from tests.realserve import decided_over_http
from tests.webfixtures import ROOT, quorum_job, run_job, served

if TYPE_CHECKING:
    from playwright.sync_api import Page

DEADLINE_S = 30.0


@dataclass
class Received:
    """What one SSE client got: each event's (id, event, data, arrival time)."""

    events: list[tuple[int, str, dict[str, object], float]] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)
    status: int = 0
    content_type: str = ""
    cut: str = ""
    ended: threading.Event = field(default_factory=threading.Event)

    def kinds(self) -> list[str]:
        return [e[1] for e in self.events]

    def wait_for(self, kind: str) -> None:
        deadline = time.monotonic() + DEADLINE_S
        while kind not in self.kinds():
            assert time.monotonic() < deadline, f"no {kind} within {DEADLINE_S} s: {self.kinds()}"
            self.ended.wait(0.01)


def listen(url: str, headers: dict[str, str], into: Received) -> threading.Thread:
    """Read the stream at ``url`` on a thread into ``into`` until it ends."""

    def read() -> None:
        try:
            with httpx.stream("GET", url, headers=headers, timeout=DEADLINE_S) as answer:
                into.status = answer.status_code
                into.content_type = answer.headers.get("content-type", "")
                record: dict[str, str] = {}
                for line in answer.iter_lines():
                    if line.startswith(":"):
                        into.comments.append(line)
                    elif line == "":
                        if "data" in record and record.get("event") != "stream_error":
                            data = json.loads(record["data"])
                            into.events.append(
                                (int(record["id"]), record["event"], data, time.time())
                            )
                        record = {}
                    else:
                        name, _, value = line.partition(": ")
                        record[name] = value
        except httpx.HTTPError as exc:  # the server closed the connection (its shutdown)
            into.cut = repr(exc)
        finally:
            into.ended.set()

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlRunStore]:
    with opened(str(tmp_path / "live.db")) as s:
        yield s


def _paused_for_alice(store: SqlRunStore) -> tuple[str, str, dict[str, str]]:
    """The one-approver quorum job paused at its gate in ``store``: (run id, gate id,
    headers with alice's new bearer token)."""
    paused = run_job(quorum_job(1), store)
    gate_id = paused.stop_reason.gate_id  # type: ignore[union-attr]
    return paused.run_id, gate_id, {"Authorization": f"Bearer {add_token(store, 'alice')}"}


def test_a_stream_sends_a_run_from_its_first_event_and_follows_it_through_its_decision_to_its_stop(
    store: SqlRunStore,
) -> None:
    run_id, gate_id, bearer = _paused_for_alice(store)
    got = Received()
    with served(store) as base:
        reader = listen(f"{base}/api/runs/{run_id}/events", bearer, got)
        got.wait_for("run_paused")
        assert not got.ended.is_set()  # open across the pause
        decided_over_http(base, gate_id, bearer, {"approved": True})
        assert got.ended.wait(DEADLINE_S), "the stream did not end after the run's stop"
        reader.join(DEADLINE_S)
    assert got.status == 200 and got.content_type.startswith("text/event-stream")
    stored = store.events(run_id)
    # every event, in order: id = seq, event = kind, data = the stored event's JSON
    assert [(i, kind) for i, kind, _, _ in got.events] == [(e.seq, e.kind) for e in stored]
    assert [data for _, _, data, _ in got.events] == [e.to_dict() for e in stored]
    kinds = got.kinds()
    assert kinds.index("run_paused") < kinds.index("gate_decided") < kinds.index("run_resumed")
    assert kinds[-1] == "run_stopped"


def test_a_stream_starts_after_the_last_event_id_or_the_after_seq(store: SqlRunStore) -> None:
    done = make_engine(store, gated=False).run(INITIAL)
    bearer = {"Authorization": f"Bearer {add_token(store, 'alice')}"}
    seqs = [e.seq for e in store.events(done.run_id)]
    with served(store) as base:
        url = f"{base}/api/runs/{done.run_id}/events"
        resumed, after = Received(), Received()
        listen(url, {**bearer, "Last-Event-ID": "3"}, resumed).join(DEADLINE_S)
        listen(f"{url}?after=5", bearer, after).join(DEADLINE_S)
        # a stopped run's stream ends at once after its last event; with nothing
        # left, 204 (an EventSource stops reconnecting: tests/test_live_stream_end.py)
        whole = httpx.get(url, headers=bearer, timeout=DEADLINE_S)
        nothing_left = httpx.get(f"{url}?after={seqs[-1]}", headers=bearer, timeout=DEADLINE_S)
    assert [e[0] for e in resumed.events] == seqs[3:]
    assert [e[0] for e in after.events] == seqs[5:]
    assert whole.status_code == 200 and whole.text.count("\nevent: ") + 1 >= len(seqs)
    assert (nothing_left.status_code, nothing_left.content) == (204, b"")


def test_a_stream_asks_for_a_token_or_a_session_and_a_known_run(store: SqlRunStore) -> None:
    done = make_engine(store, gated=False).run(INITIAL)
    token = add_token(store, "viewer-vic", role="viewer")
    app = create_app(store)
    with served(store, app) as base:
        url = f"{base}/api/runs/{done.run_id}/events"
        anonymous = httpx.get(url, timeout=DEADLINE_S)
        wrong = httpx.get(url, headers={"Authorization": "Bearer nope"}, timeout=DEADLINE_S)
        viewer = httpx.get(url, headers={"Authorization": f"Bearer {token}"}, timeout=DEADLINE_S)
        by_cookie = httpx.get(url, cookies={"converge_session": token}, timeout=DEADLINE_S)
        unknown = httpx.get(
            f"{base}/api/runs/nope/events",
            headers={"Authorization": f"Bearer {token}"},
            timeout=DEADLINE_S,
        )
    assert anonymous.status_code == 401 and wrong.status_code == 401
    assert viewer.status_code == 200 and "event: run_stopped" in viewer.text
    assert by_cookie.status_code == 200 and "event: run_stopped" in by_cookie.text
    assert unknown.status_code == 404
    doc = app.openapi()["paths"]["/api/runs/{run_id}/events"]["get"]
    assert "text/event-stream" in doc["responses"]["200"]["content"]
    assert doc["security"] == [{"token": []}]


def test_an_idle_stream_sends_a_keep_alive_comment_every_interval(
    store: SqlRunStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    import converge.web.live

    # 15 s in service; a fifth of a second here, the same code path
    monkeypatch.setattr(converge.web.live, "KEEP_ALIVE_S", 0.2)
    paused = run_job(quorum_job(1), store)
    bearer = {"Authorization": f"Bearer {add_token(store, 'alice')}"}
    got = Received()
    with served(store) as base:
        listen(f"{base}/api/runs/{paused.run_id}/events", bearer, got)
        got.wait_for("run_paused")
        deadline = time.monotonic() + DEADLINE_S
        while len(got.comments) < 2 and time.monotonic() < deadline:
            got.ended.wait(0.05)
        still_open = not got.ended.is_set()
    assert len(got.comments) >= 2, "no keep-alive comments on an idle stream"
    assert all(c.startswith(":") for c in got.comments)
    assert still_open  # the paused run's stream stays open between its comments


def test_events_another_process_commits_reach_an_open_stream(
    store: SqlRunStore, tmp_path: Path
) -> None:
    url = str(store.sql_engine.url)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started = subprocess.run(
        [sys.executable, "-m", "tests.hitlfixtures", "run", url, "cli-run"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert json.loads(started.stdout.splitlines()[-1])["stop"] == "hitl_gate_pending"
    [gate] = store.gates(pending=True)
    gate_id = gate.gate_id
    bearer = {"Authorization": f"Bearer {add_token(store, 'alice')}"}
    got = Received()
    with served(store) as base:
        reader = listen(f"{base}/api/runs/cli-run/events", bearer, got)
        got.wait_for("run_paused")
        subprocess.run(
            [sys.executable, "-m", "tests.hitlfixtures", "resume", url, gate_id, "approve", "bob"],
            env=env,
            capture_output=True,
            timeout=120,
            check=True,
        )
        assert got.ended.wait(DEADLINE_S)
        reader.join(DEADLINE_S)
    assert [(i, k) for i, k, _, _ in got.events] == [
        (e.seq, e.kind) for e in store.events("cli-run")
    ]
    assert got.kinds()[-1] == "run_stopped"


def test_twenty_streams_of_a_run_share_one_reader_and_get_each_event_soon_after_its_commit(
    store: SqlRunStore,
) -> None:
    run_id, gate_id, bearer = _paused_for_alice(store)
    app = create_app(store)
    live: LiveRuns = app.state.live
    reads = 0
    events = store.events

    def counted(*args: object, **kw: object) -> object:
        nonlocal reads
        reads += 1
        return events(*args, **kw)  # type: ignore[arg-type]

    store.events = counted  # type: ignore[method-assign]
    streams = [Received() for _ in range(20)]
    with served(store, app) as base:
        readers = [listen(f"{base}/api/runs/{run_id}/events", bearer, got) for got in streams]
        for got in streams:
            got.wait_for("run_paused")
        assert len(live.feeds) == 1
        [feed] = live.feeds.values()
        assert len(feed.subscribers) == 20
        reads_before, t0 = reads, time.monotonic()
        while time.monotonic() - t0 < 0.5:  # idle: no commit, nothing read for all 20
            streams[0].ended.wait(0.05)
        assert reads - reads_before <= 1  # at most the feed's safety read
        before_decision = store.run(run_id).last_seq
        decided_over_http(base, gate_id, bearer, {"approved": True})
        for got in streams:
            assert got.ended.wait(DEADLINE_S)
        for reader in readers:
            reader.join(DEADLINE_S)
    store.events = events  # type: ignore[method-assign]
    stored = {e.seq: e for e in store.events(run_id)}
    # from the event's time (before its commit) to its arrival: a generous bound
    new = [seq for seq in stored if seq > before_decision]
    lags = [
        arrived - stored[seq].ts
        for got in streams
        for seq, _, _, arrived in got.events
        if seq > before_decision
    ]
    assert len(lags) == 20 * len(new) and new
    assert statistics.quantiles(lags, n=20)[-1] < 1.0, sorted(lags)[-5:]
    assert all([e[0] for e in got.events] == sorted(stored) for got in streams)


# alone: "at once" is under 3 s from SIGTERM to exit, a time of the CPU it is given
@pytest.mark.serial
def test_sigterm_stops_converge_serve_at_once_with_streams_open(
    store: SqlRunStore, tmp_path: Path
) -> None:
    paused = make_engine(store).run(INITIAL)
    bearer = {"Authorization": f"Bearer {add_token(store, 'alice')}"}
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    db = str(store.sql_engine.url)
    cmd = [sys.executable, "-m", "converge.cli", "serve", "--port", str(port), "--db", db]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    streams = [Received() for _ in range(3)]
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # uvicorn says so once it listens
            if "Uvicorn running on" in line:
                break
        url = f"http://127.0.0.1:{port}/api/runs/{paused.run_id}/events"
        for got in streams:
            listen(url, bearer, got)
        for got in streams:
            got.wait_for("run_paused")
        proc.send_signal(signal.SIGTERM)
        t0 = time.monotonic()
        rest, _ = proc.communicate(timeout=10)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert all(got.ended.wait(DEADLINE_S) for got in streams)
    # the streams were ended, not waited for until uvicorn's graceful timeout
    assert took < GRACEFUL_SHUTDOWN_S, rest
    assert "graceful shutdown exceeded" not in rest


# alone: "within a second" is a redraw by Chromium, a time of the CPU it is given
@pytest.mark.serial
def test_a_decision_made_through_the_api_shows_on_an_open_run_page_within_a_second(
    store: SqlRunStore,
    page: Page,
) -> None:
    from playwright.sync_api import expect

    paused = run_job(quorum_job(1), store)
    gate_id = paused.stop_reason.gate_id  # type: ignore[union-attr]
    token = add_token(store, "alice")
    with served(store) as base:
        sign_in(page, base, token)
        page.goto(f"{base}/runs/{paused.run_id}")
        expect(page.locator("#run-status")).to_have_text("paused")
        expect(page.locator("#run-gates")).to_contain_text("pending")
        facts_before = int(page.locator("#run-facts").inner_text())
        budget_before = page.locator("#budget").inner_text()
        reloads: list[str] = []
        page.on("framenavigated", lambda frame: reloads.append(frame.url))
        decided = httpx.post(
            f"{base}/api/gates/{gate_id}/decision",
            headers={"Authorization": f"Bearer {token}"},
            json={"approved": True, "reason": "ours"},
        )
        assert decided.status_code == 202
        # within 1 s of the decision: the gate, the run's stop, its facts, budget, timeline
        expect(page.locator("#run-gates")).to_contain_text("approved", timeout=1_000)
        expect(page.locator("#run-gates")).to_contain_text("alice", timeout=1_000)
        expect(page.locator("#timeline")).to_contain_text("approved", timeout=1_000)
        expect(page.locator("#run-status")).to_have_text("stopped", timeout=5_000)
        expect(page.locator("#stop-kind")).to_have_text("converged", timeout=5_000)
        assert int(page.locator("#run-facts").inner_text()) > facts_before
        expect(page.locator("#budget svg g.bar")).not_to_have_count(0)
        # the resumed leg's cycles moved the bars (redrawn, not reloaded)
        expect(page.locator("#budget")).not_to_have_text(budget_before, timeout=5_000)
        expect(page.locator("#live")).to_have_count(0)
        assert reloads == []  # never reloaded: the page redrew its parts


def _watch(db: str, run_id: str, *extra: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "converge.cli", "watch", run_id, "--db", db, *extra]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_converge_watch_prints_each_event_and_follows_a_pause_through_its_decision_to_its_stop(
    store: SqlRunStore,
) -> None:
    engine = make_engine(store)
    paused = engine.run(INITIAL)
    gate_id = paused.stop_reason.gate_id  # type: ignore[union-attr]
    proc = _watch(str(store.sql_engine.url), paused.run_id)
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # it waits at the pause, printing as it goes
            lines.append(line.rstrip("\n"))
            if line.startswith("paused after"):
                break
        assert proc.poll() is None
        final = engine.resume(gate_id, GateDecision.approve(by="bob"))
        rest, err = proc.communicate(timeout=DEADLINE_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    lines += rest.splitlines()
    text = "\n".join(lines)
    assert proc.returncode == final.stop_reason.exit_code, err
    assert lines[0].startswith(f"run {paused.run_id} started")
    assert "cycle 1 started: scan" in text
    assert "cycle 1 · scan: 3 proposals, 0+0 tokens" in text
    assert "fact promoted (package" in text or "facts promoted (package" in text
    assert f"gate {gate_id} opened: Classify b (scan)" in text
    assert f"gate {gate_id} approved by bob" in text
    assert f"resumed after gate {gate_id}" in text
    assert f"stopped: {final.stop_reason.kind_code()}" in text
    order = [
        text.index(s) for s in ("opened", "paused after", "approved by bob", "resumed", "stopped:")
    ]
    assert order == sorted(order)


def test_converge_watch_json_prints_every_event_as_a_json_line(store: SqlRunStore) -> None:
    done = make_engine(store, gated=False).run(INITIAL)
    proc = _watch(str(store.sql_engine.url), done.run_id, "--json")
    out, err = proc.communicate(timeout=DEADLINE_S)
    assert proc.returncode == done.stop_reason.exit_code, err
    assert [json.loads(line) for line in out.splitlines()] == [
        e.to_dict() for e in store.events(done.run_id)
    ]


def test_converge_watch_exits_with_the_code_of_a_run_that_stopped_short(
    store: SqlRunStore,
) -> None:
    from engine import Budget, Engine
    from tests.hitlfixtures import SUGGESTORS

    short = Engine(budget=Budget(max_cycles=1), store=store).register(*SUGGESTORS).run(INITIAL)
    assert short.stop_reason.exit_code != 0  # the budget ran out: not exit 0
    proc = _watch(str(store.sql_engine.url), short.run_id)
    out, err = proc.communicate(timeout=DEADLINE_S)
    assert proc.returncode == short.stop_reason.exit_code, err
    # a line per event (facts of a batch share one), none empty
    assert len(out.splitlines()) >= 3 and all(line.strip() for line in out.splitlines())
    assert f"stopped: {short.stop_reason.kind_code()}" in out.splitlines()[-1]
