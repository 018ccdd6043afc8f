"""Several servers (issue 57): two real ``converge serve`` of one PostgreSQL behind the
real nginx of docs/scale-out.md (the page's own configuration file,
tests/proxyfixtures.py). Decisions, forks and streams work whichever server
answers (nginx's ``X-Upstream`` says which); the sign-in failure limit is counted
together (tests/test_access_proxy.py, same proxy); and a server killed with
SIGKILL under a client following a run's events costs that client nothing: it
reconnects through the proxy with ``Last-Event-ID``, the other server answers,
and it has every event of the run once, as the store has them."""

from __future__ import annotations

import json
import re
import secrets
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from audit import open_store
from audit.people import add_token
from converge.web.auth import WEB_SECRET_ENV
from engine.status import RunStatus
from tests.hitlfixtures import store_url_for
from tests.pgfixtures import require_pg
from tests.proxyfixtures import nginx_in_front
from tests.realserve import Served, decided_over_http, served_cli
from tests.webfixtures import quorum_job, run_job

WITHIN_S = 60.0
"""Longest wait for a run to reach a status or a stream to end (a busy machine)."""


@dataclass
class Followed:
    """What one client following a stream through the proxy got: the answer's status,
    the server that answered (``X-Upstream``), each event's (seq, kind), and how it
    ended (``cut``: the connection broke before the stream's end)."""

    status: int = 0
    upstream: str = ""
    events: list[tuple[int, str]] = field(default_factory=list)
    cut: str = ""
    ended: threading.Event = field(default_factory=threading.Event)

    def seqs(self) -> list[int]:
        return [seq for seq, _ in self.events]

    def wait_for(self, kind: str) -> None:
        deadline = time.monotonic() + WITHIN_S
        while kind not in [k for _, k in self.events]:
            assert time.monotonic() < deadline and not self.ended.is_set(), self
            time.sleep(0.02)


def follow(url: str, headers: dict[str, str]) -> tuple[Followed, threading.Thread]:
    """Read the SSE stream at ``url`` on a thread until it ends or breaks."""
    got = Followed()

    def read() -> None:
        try:
            timeout = httpx.Timeout(WITHIN_S, connect=10)
            with httpx.stream("GET", url, headers=headers, timeout=timeout) as answer:
                got.status = answer.status_code
                got.upstream = _last_upstream(answer.headers)
                record: dict[str, str] = {}
                for line in answer.iter_lines():
                    if line == "":
                        if "id" in record and record.get("event") != "stream_error":
                            got.events.append((int(record["id"]), record["event"]))
                        record = {}
                    elif not line.startswith(":"):
                        name, _, value = line.partition(": ")
                        record[name] = value
        except httpx.HTTPError as exc:
            got.cut = repr(exc)
        finally:
            got.ended.set()

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return got, thread


def _last_upstream(headers: httpx.Headers) -> str:
    """The server that answered: the last of nginx's ``$upstream_addr`` (a request
    passed on after a refused connection names both)."""
    named: str = headers.get("x-upstream", "")
    return named.split(",")[-1].strip()


@contextmanager
def two_servers_behind_nginx(url: str, workdir: Path) -> Iterator[tuple[str, dict[str, Served]]]:
    """Two ``converge serve`` of ``url`` (believing the proxy's X-Forwarded-For, one
    ``$CONVERGE_WEB_SECRET``) behind nginx; yields the proxy's base URL and each
    server by its ``host:port``."""
    behind = ("--forwarded-allow-ips", "127.0.0.1")
    env = {WEB_SECRET_ENV: "the-secret-of-the-forms-" + secrets.token_hex(16)}
    with (
        served_cli(url, workdir / "one.log", *behind, env=env) as one,
        served_cli(url, workdir / "two.log", *behind, env=env) as two,
        nginx_in_front([one.base, two.base], workdir) as proxy,
    ):
        yield proxy, {s.base.removeprefix("http://"): s for s in (one, two)}


def _wait_status(proxy: str, run_id: str, headers: dict[str, str], status: str) -> None:
    deadline = time.monotonic() + WITHIN_S
    while True:
        answer = httpx.get(f"{proxy}/api/runs/{run_id}", headers=headers, timeout=30)
        now = answer.json().get("run", {}).get("status") if answer.status_code == 200 else None
        if now == status:
            return
        assert time.monotonic() < deadline, f"run {run_id}: {answer.status_code} {answer.text}"
        time.sleep(0.1)


def _gate_runs(url: str, n: int) -> tuple[list[tuple[str, str]], str]:
    """``n`` runs paused at their gate (run id, gate id) and an approver's token."""
    store = open_store(url)
    try:
        runs = []
        for _ in range(n):
            paused = run_job(quorum_job(1), store)
            runs.append((paused.run_id, paused.stop_reason.gate_id))  # type: ignore[union-attr]
        return runs, add_token(store, "alice")
    finally:
        store.close()


def _stored_seqs(url: str, run_id: str) -> list[int]:
    store = open_store(url)
    try:
        return [e.seq for e in store.events(run_id)]
    finally:
        store.close()


def test_a_decision_a_fork_and_a_stream_work_through_either_server_behind_nginx(
    tmp_path: Path,
) -> None:
    require_pg()
    with store_url_for("postgresql", tmp_path) as url:
        runs, token = _gate_runs(url, 2)
        bearer = {"Authorization": f"Bearer {token}"}
        answered: dict[str, set[str]] = {"decision": set(), "stream": set(), "fork": set()}
        with two_servers_behind_nginx(url, tmp_path) as (proxy, servers):
            for _, gate_id in runs:  # one after the other: round robin, one each
                decided = decided_over_http(proxy, gate_id, bearer, {"approved": True})
                answered["decision"].add(_last_upstream(decided.headers))
            for run_id, _ in runs:  # resumed by the pool of the server that decided
                _wait_status(proxy, run_id, bearer, RunStatus.STOPPED)
            streams = []
            for run_id, _ in runs:
                got, reader = follow(f"{proxy}/api/runs/{run_id}/events", bearer)
                reader.join(WITHIN_S)
                assert got.ended.is_set() and not got.cut, got
                answered["stream"].add(got.upstream)
                streams.append((run_id, got))
            forks = []
            for run_id, _ in runs:
                forked = httpx.post(
                    f"{proxy}/api/runs/{run_id}/fork", headers=bearer, json={"cycle": 1}, timeout=30
                )
                assert forked.status_code == 202, forked.text
                answered["fork"].add(_last_upstream(forked.headers))
                forks.append(forked.json()["run_id"])
            for fork in forks:  # executed by the pool of the server that forked it
                _wait_status(proxy, fork, bearer, RunStatus.STOPPED)
            both = set(servers)
        for run_id, got in streams:  # the whole run, once, in order
            assert got.status == 200 and got.seqs() == _stored_seqs(url, run_id)
            assert got.events[-1][1] == "run_stopped"
        assert answered == {"decision": both, "stream": both, "fork": both}, answered


def test_a_client_whose_server_is_killed_mid_stream_reconnects_through_nginx_and_misses_nothing(
    tmp_path: Path,
) -> None:
    require_pg()
    with store_url_for("postgresql", tmp_path) as url:
        [(run_id, gate_id)], token = _gate_runs(url, 1)
        bearer = {"Authorization": f"Bearer {token}"}
        events = f"/api/runs/{run_id}/events"
        with two_servers_behind_nginx(url, tmp_path) as (proxy, servers):
            first, reader = follow(proxy + events, bearer)
            first.wait_for("run_paused")  # the run so far, and the stream stays open
            assert not first.ended.is_set() and first.upstream in servers, first
            victim = servers[first.upstream]
            (survivor,) = (s for addr, s in servers.items() if addr != first.upstream)
            victim.proc.send_signal(signal.SIGKILL)
            victim.proc.wait(10)
            reader.join(WITHIN_S)
            assert first.ended.is_set() and first.cut, first  # the connection broke
            # the gate is decided (through the proxy: the survivor) while the client
            # is away: the resumed run's events are committed before it comes back
            decided = decided_over_http(proxy, gate_id, bearer, {"approved": True})
            assert _last_upstream(decided.headers) == survivor.base.removeprefix("http://")
            last = str(first.seqs()[-1])
            again, reader = follow(proxy + events, {**bearer, "Last-Event-ID": last})
            reader.join(WITHIN_S)
            assert again.ended.is_set() and not again.cut, again
        stored = _stored_seqs(url, run_id)
    assert again.status == 200 and again.upstream == survivor.base.removeprefix("http://")
    received = first.seqs() + again.seqs()
    assert received == stored, (first.events, again.events)  # none missed, none twice
    assert again.events[-1][1] == "run_stopped" and len(again.events) > 1
    assert json.dumps(received) == json.dumps(sorted(set(received)))


def _csrf(page: httpx.Response) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert found is not None, page.text[:2000]
    return found.group(1)


def test_a_pages_form_rendered_by_one_server_is_accepted_by_the_other(tmp_path: Path) -> None:
    """Round robin sends a form's post to either server: the servers of one store
    share the key of their forms' CSRF tokens (``$CONVERGE_WEB_SECRET``), so a gate
    decided and a run forked from the pages work whichever server rendered them."""
    require_pg()
    with store_url_for("postgresql", tmp_path) as url:
        [(run_id, gate_id)], token = _gate_runs(url, 1)
        with (
            two_servers_behind_nginx(url, tmp_path) as (proxy, servers),
            httpx.Client(timeout=30) as browser,
        ):
            one, two = (s.base for s in servers.values())
            login = browser.get(f"{one}/login")
            signed = browser.post(
                f"{one}/login", data={"csrf": _csrf(login), "token": token, "next": "/"}
            )
            assert signed.status_code == 303, signed.text
            page = browser.get(f"{one}/gates/{gate_id}")
            decided = browser.post(
                f"{two}/gates/{gate_id}/decision",
                data={"csrf": _csrf(page), "decision": "approve", "reason": "fine"},
            )
            assert decided.status_code == 303, decided.text  # not 403
            bearer = {"Authorization": f"Bearer {token}"}
            _wait_status(proxy, run_id, bearer, RunStatus.STOPPED)
            run_page = browser.get(f"{two}/runs/{run_id}")
            forked = browser.post(
                f"{one}/runs/{run_id}/fork", data={"csrf": _csrf(run_page), "cycle": "1"}
            )
            assert forked.status_code == 303, forked.text
            fork = forked.headers["location"].rsplit("/", 1)[-1]
            _wait_status(proxy, fork, bearer, RunStatus.STOPPED)
