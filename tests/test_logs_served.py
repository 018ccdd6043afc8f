"""The real processes' log lines (issue 57, logs): ``converge serve --log-format json``,
its pool processes and ``converge worker`` write one JSON object a line on stderr
(time, level, event, message; run_id, gate_id and person where known), and no
line of a whole journey (tokens made, a sign-in through the form, a bearer
approval, a keyed store, a database and a broker with passwords) carries a secret,
in either format."""

from __future__ import annotations

import json
import re
import secrets
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from audit import open_store
from audit.people import add_token
from engine.status import RunStatus
from tests.faultfixtures import run_cli
from tests.hitlfixtures import store_url_for
from tests.pgfixtures import require_pg
from tests.realserve import converge_process, decided_over_http, free_port, served_cli, stop_within
from tests.test_live_runs import DEADLINE_S, Received, listen
from tests.webfixtures import QUORUM_JOB, quorum_job, run_job

REQUIRED = ("time", "level", "event", "message")
LEVELS = {"debug", "info", "warning", "error", "critical"}
EVENT = re.compile(r"^[a-z][a-z_]*$")


def json_lines(text: str) -> list[dict[str, Any]]:
    """Every line of ``text`` as a JSON object with the required keys (AssertionError
    naming the first line that is not)."""
    found = []
    for n, line in enumerate(text.splitlines(), 1):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            raise AssertionError(f"line {n} is no JSON object: {line!r}") from None
        assert isinstance(obj, dict), line
        missing = [k for k in REQUIRED if k not in obj]
        assert not missing, f"line {n} lacks {missing}: {line}"
        assert obj["level"] in LEVELS and EVENT.match(obj["event"]), line
        when = datetime.fromisoformat(obj["time"])
        assert obj["time"].endswith("Z") and when.utcoffset() is not None, line
        found.append(obj)
    return found


def _wait_status(base: str, run_id: str, headers: dict[str, str], status: str) -> dict[str, Any]:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        data = httpx.get(f"{base}/api/runs/{run_id}", headers=headers, timeout=30).json()
        now = data.get("run", {}).get("status")
        if now == status or time.monotonic() > deadline:
            assert now == status, data
            return dict(data)
        time.sleep(0.1)


def test_serve_and_its_pool_log_one_json_object_a_line_with_the_run_gate_and_person(
    tmp_path: Path,
) -> None:
    url = str(tmp_path / "logs.db")
    store = open_store(url)
    try:
        paused = run_job(quorum_job(1), store)
        gate_id = paused.stop_reason.gate_id  # type: ignore[union-attr]
        bearer = {"Authorization": f"Bearer {add_token(store, 'alice')}"}
    finally:
        store.close()
    errors = tmp_path / "serve.err"
    got = Received()
    with served_cli(url, tmp_path / "serve.log", "--log-format", "json", errors=errors) as served:
        reader = listen(f"{served.base}/api/runs/{paused.run_id}/events", bearer, got)
        got.wait_for("gate_opened")  # the stream is open
        decided_over_http(served.base, gate_id, bearer, {"approved": True})
        assert got.ended.wait(DEADLINE_S), "the stream did not end at the run's stop"
        reader.join(DEADLINE_S)
        forked = httpx.post(
            f"{served.base}/api/runs/{paused.run_id}/fork",
            headers=bearer,
            json={"cycle": 1},
            timeout=30,
        )
        assert forked.status_code == 202, forked.text
        fork = forked.json()["run_id"]
        _wait_status(served.base, fork, bearer, RunStatus.STOPPED)
    lines = json_lines(errors.read_text())

    def having(event: str, **fields: Any) -> list[dict[str, Any]]:
        return [o for o in lines if o["event"] == event and fields.items() <= o.items()]

    run = paused.run_id
    assert having("gate_decided", gate_id=gate_id, run_id=run, person="alice", process="serve")
    assert having("stream_opened", run_id=run, person="alice")
    assert having("stream_closed", run_id=run, person="alice")
    assert having("run_forked", run_id=run, person="alice")
    # the resume and the fork ran in the pool's processes, which log as JSON too
    assert having("run_stopped", run_id=run, process="pool")
    assert having("run_stopped", run_id=fork, process="pool")
    # uvicorn's lines: its start and each request, with the run, gate and person
    assert any("Uvicorn running on" in o["message"] for o in having("server"))
    decision = having("http_request", method="POST", gate_id=gate_id, person="alice")
    assert decision and decision[0]["status"] == 202
    assert having("http_request", method="GET", run_id=run, status=200, person="alice")


# -- no secret in any line of a whole journey -----------------------------------------


@contextmanager
def redis_with_password(workdir: Path, password: str) -> Iterator[str]:
    """A private redis-server on a free port of 127.0.0.1 requiring ``password``;
    yields its URL (the password in it), stopped after."""
    port = free_port()
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--requirepass", password,
         "--save", "", "--appendonly", "no", "--dir", str(workdir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"redis://:{password}@127.0.0.1:{port}/0"
    try:
        deadline = time.monotonic() + 30
        while True:
            import redis

            try:
                redis.Redis.from_url(url).ping()
                break
            except redis.RedisError:
                assert time.monotonic() < deadline and proc.poll() is None, "no redis-server"
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def _sign_in_through_the_form(base: str, token: str) -> httpx.Client:
    client = httpx.Client(base_url=base, timeout=30)
    page = client.get("/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf is not None, page.text
    wrong = client.post("/login", data={"csrf": csrf.group(1), "token": "cvg_" + "x" * 43})
    assert wrong.status_code == 401
    csrf = re.search(r'name="csrf" value="([^"]+)"', wrong.text)
    assert csrf is not None
    signed = client.post("/login", data={"csrf": csrf.group(1), "token": token, "next": "/"})
    assert signed.status_code == 303, signed.text
    assert client.get("/").status_code == 200
    return client


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_no_token_key_or_password_is_in_any_log_line_of_a_whole_journey(
    fmt: str, tmp_path: Path
) -> None:
    require_pg()
    key = "audit-key-" + secrets.token_hex(16)
    db_password = "db-pass-" + secrets.token_hex(8)
    broker_password = "broker-pass-" + secrets.token_hex(8)
    env = {"CONVERGE_AUDIT_KEY": key}
    job = tmp_path / "quorum.yaml"
    job.write_text(QUORUM_JOB % (1, ""))
    logs = {
        name: tmp_path / name for name in ("worker.err", "worker.out", "serve.err", "serve.out")
    }
    said: list[str] = []
    with (
        store_url_for("postgresql", tmp_path) as plain,
        redis_with_password(tmp_path, broker_password) as broker,
    ):
        # PostgreSQL trusts 127.0.0.1: the password is sent, and must be kept
        url = plain.replace("postgres@", f"postgres:{db_password}@", 1)
        assert db_password in url
        store = open_store(url, key=key.encode())
        try:
            run_job(quorum_job(1), store)  # the store is keyed from now on
            admin = add_token(store, "ada", "admin")
        finally:
            store.close()
        made = run_cli(["token", "add", "alice", "--db", url, "--token", admin], env=env)
        assert made.returncode == 0, made
        token = made.stdout.split()[-1]
        said.append(made.stderr)
        tokens = [admin, token]
        worker = converge_process(
            "worker", "--broker", broker, "--db", url, "--log-format", fmt,
            log=logs["worker.out"], errors=logs["worker.err"], env=env,
        )  # fmt: skip
        try:
            with served_cli(
                url, logs["serve.out"], "--log-format", fmt, env=env, errors=logs["serve.err"]
            ) as served:
                submitted = run_cli(
                    ["submit", str(job), "--db", url, "--broker", broker, "--json",
                     "--token", token],
                    env=env,
                )  # fmt: skip
                assert submitted.returncode == 0, submitted
                said.append(submitted.stderr)
                run_id = json.loads(submitted.stdout)["run_id"]
                bearer = {"Authorization": f"Bearer {token}"}
                at_gate = _wait_status(served.base, run_id, bearer, RunStatus.PAUSED)
                gate_id = at_gate["gates"][0]["gate_id"]
                page = _sign_in_through_the_form(served.base, token)
                try:
                    assert page.get(f"/runs/{run_id}").status_code == 200
                finally:
                    page.close()
                decided_over_http(
                    served.base, gate_id, bearer, {"approved": True, "reason": "fine"}
                )
                got = Received()
                listen(f"{served.base}/api/runs/{run_id}/events", bearer, got).join(DEADLINE_S)
                assert got.kinds()[-1] == "run_stopped", got.kinds()
                refused = httpx.get(
                    f"{served.base}/api/gates", headers={"Authorization": "Bearer cvg_nope"}
                )
                assert refused.status_code == 401
        finally:
            stop_within(worker, signal.SIGTERM, logs["worker.err"])
        access = run_cli(["access-log", "--json", "--db", url, "--token", admin], env=env)
        assert access.returncode == 0, access
        said += [access.stdout, access.stderr]
    text = {name: path.read_text(errors="replace") for name, path in logs.items()}
    assert "Uvicorn running on" in text["serve.err"]  # the server's lines
    assert "gate_decided" in text["serve.err"] and "signed_in" in text["serve.err"]
    assert f"run {run_id} stopped" in text["serve.err"]  # its pool's (the resume)
    assert f"run {run_id} stopped" in text["worker.err"]  # the worker's (to the gate)
    if fmt == "json":
        for name in ("serve.err", "worker.err"):
            json_lines(text[name])
    for secret in (key, db_password, broker_password, *tokens):
        for name, written in [*text.items(), *((f"command {n}", t) for n, t in enumerate(said))]:
            assert secret not in written, f"a secret in {name}: {written[-4000:]}"
