"""The end of a run's event stream: 204 once nothing more will come (issue 53, item 8).

A stream ends after its run's ``run_stopped``; an ``EventSource`` then reconnects
with ``Last-Event-ID`` (that seq) 3 s later, and kept doing so forever while the
answer was an empty ``200``. The server now answers a stopped run with nothing
after the seq asked for ``204 No Content``, which makes an ``EventSource`` stop
(WHATWG HTML, server-sent events: a client "can be told to stop reconnecting
using the HTTP 204 No Content response code"). Shown through the real ``converge
serve`` with its pool, with httpx on SQLite and PostgreSQL, and with a real
``EventSource`` in headless Chromium.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from audit.people import add_token
from converge.web.live import LIVE_KINDS
from tests.faultfixtures import opened
from tests.hitlfixtures import INITIAL, make_engine
from tests.realserve import Served, served_cli
from tests.test_live_runs import DEADLINE_S, Received, listen
from tests.webfixtures import quorum_job, run_job

if TYPE_CHECKING:
    from playwright.sync_api import Page

RECONNECT_WITHIN_S = 30.0
"""An EventSource reconnects 3 s after its stream ends (Chromium's default); past
this, it did not come back or did not stop."""


def _stream(served: Served, run_id: str, headers: dict[str, str], query: str = "") -> Received:
    """The whole stream of ``run_id`` as one client reads it (it must end)."""
    got = Received()
    url = f"{served.base}/api/runs/{run_id}/events{query}"
    listen(url, headers, got).join(DEADLINE_S)
    assert got.ended.is_set(), f"the stream of {run_id} did not end"
    return got


def test_a_stopped_runs_stream_sends_what_is_left_then_its_reconnect_gets_204(
    store_url: str, tmp_path: Path
) -> None:
    with opened(store_url) as store:
        done = make_engine(store, gated=False).run(INITIAL)
        seqs = [e.seq for e in store.events(done.run_id)]
        bearer = {"Authorization": f"Bearer {add_token(store, 'alice', 'viewer')}"}
    with served_cli(store_url, tmp_path / "serve.log") as served:
        whole = _stream(served, done.run_id, bearer)
        last = str(whole.events[-1][0])
        reconnect = httpx.get(
            f"{served.base}/api/runs/{done.run_id}/events",
            headers={**bearer, "Last-Event-ID": last},
            timeout=DEADLINE_S,
        )
        page_of_a_stopped_run = httpx.get(
            f"{served.base}/api/runs/{done.run_id}/events?after={seqs[-1]}",
            headers=bearer,
            timeout=DEADLINE_S,
        )
        rest = _stream(served, done.run_id, {**bearer, "Last-Event-ID": str(seqs[-3])})
        unknown = httpx.get(f"{served.base}/api/runs/nope/events", headers=bearer, timeout=30)
        doc = httpx.get(f"{served.base}/api/openapi.json", timeout=30).json()

    assert (whole.status, whole.kinds()[-1]) == (200, "run_stopped")
    assert [e[0] for e in whole.events] == seqs
    for nothing_left in (reconnect, page_of_a_stopped_run):
        assert nothing_left.status_code == 204, nothing_left.text
        assert nothing_left.content == b""
    # what is left is sent, then the stream ends: a 200 whose own reconnect gets 204
    assert rest.status == 200 and [e[0] for e in rest.events] == seqs[-2:]
    assert unknown.status_code == 404
    answers = doc["paths"]["/api/runs/{run_id}/events"]["get"]["responses"]
    assert "Last-Event-ID" in answers["204"]["description"]
    assert "reconnect" in answers["204"]["description"]


def test_a_live_runs_stream_stays_open_and_ends_at_the_stop_after_which_a_reconnect_gets_204(
    store_url: str, tmp_path: Path
) -> None:
    with opened(store_url) as store:
        paused = run_job(quorum_job(1), store)
        gate_id = paused.stop_reason.gate_id  # type: ignore[union-attr]
        bearer = {"Authorization": f"Bearer {add_token(store, 'alice')}"}
        at_pause = store.run(paused.run_id).last_seq
    got = Received()
    with served_cli(store_url, tmp_path / "serve.log") as served:
        events = f"{served.base}/api/runs/{paused.run_id}/events"
        # the run page's stream of a paused run: nothing to send yet, and it stays open
        reader = listen(f"{events}?after={at_pause}", bearer, got)
        deadline = time.monotonic() + DEADLINE_S
        while got.status == 0 and time.monotonic() < deadline:
            got.ended.wait(0.01)
        assert got.status == 200 and not got.ended.is_set()
        decided = httpx.post(
            f"{served.base}/api/gates/{gate_id}/decision", headers=bearer, json={"approved": True}
        )
        assert decided.status_code == 202, decided.text
        assert got.ended.wait(DEADLINE_S), "the stream did not end after the run's stop"
        reader.join(DEADLINE_S)
        reconnect = httpx.get(
            events, headers={**bearer, "Last-Event-ID": str(got.events[-1][0])}, timeout=30
        )
    assert got.kinds()[0] == "gate_decided" and got.kinds()[-1] == "run_stopped"
    assert got.events[0][0] == at_pause + 1
    assert (reconnect.status_code, reconnect.content) == (204, b"")


def _events_answers(served: Served, run_id: str) -> list[int]:
    """The statuses ``converge serve`` logged for the streams of ``run_id``, in order."""
    line = re.compile(rf'"GET /api/runs/{run_id}/events[^ ]* HTTP/1.1" (\d{{3}})')
    return [int(s) for s in line.findall(served.output())]


def test_an_eventsource_in_chromium_stops_at_the_204_after_its_stream_ended(
    tmp_path: Path,
    page: Page,
) -> None:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    url = str(tmp_path / "stream.db")
    with opened(url) as store:
        done = make_engine(store, gated=False).run(INITIAL)
        seqs = [e.seq for e in store.events(done.run_id)]
        token = add_token(store, "alice", "viewer")
    with served_cli(url, tmp_path / "serve.log") as served:
        page.context.add_cookies([{"name": "converge_session", "value": token, "url": served.base}])
        page.goto(served.base + "/runs")
        page.evaluate(
            """([run, kinds]) => {
              const seen = window.seen = {opened: 0, errors: 0, ids: [], closedAt: null};
              const source = window.source = new EventSource(`/api/runs/${run}/events`);
              source.onopen = () => { seen.opened += 1; };
              source.onerror = () => {
                seen.errors += 1;
                if (source.readyState === EventSource.CLOSED) seen.closedAt = seen.errors;
              };
              for (const kind of kinds)
                source.addEventListener(kind, e => seen.ids.push(Number(e.lastEventId)));
            }""",
            [done.run_id, list(LIVE_KINDS)],
        )
        # CLOSED is final (the spec: a failed connection is never retried); before the
        # fix the source went CONNECTING, OPEN, CONNECTING... every 3 s and never got here
        try:
            page.wait_for_function(
                "window.source.readyState === EventSource.CLOSED",
                timeout=RECONNECT_WITHIN_S * 1000,
            )
        except PlaywrightTimeout:
            pytest.fail(
                f"the EventSource did not stop within {RECONNECT_WITHIN_S} s: the server "
                f"answered its requests {_events_answers(served, done.run_id)}"
            )
        seen = page.evaluate("window.seen")
        deadline = time.monotonic() + DEADLINE_S
        while len(_events_answers(served, done.run_id)) < 2 and time.monotonic() < deadline:
            served.proc.poll()  # the log line of the 204 may come a moment after it
            time.sleep(0.01)
        answers = _events_answers(served, done.run_id)

    assert seen["ids"] == seqs  # every event once, in order
    # one stream (200, every event, its end), one reconnect (204), and no more
    assert answers == [200, 204], served.output()[-3000:]
    assert seen["opened"] == 1
    assert seen["errors"] == 2 and seen["closedAt"] == 2  # the end of the stream, then the 204
