"""Whoever runs, submits, resumes or forks a run is authenticated (issue 40, item 2),
so four eyes holds against every runner identity:

- once anyone is registered, the runner (``--by``, ``$CONVERGE_USER`` or the login)
  must be a known person of the store;
- when tokens are required (``require-token true``, or by default once anyone is
  registered), the runner needs a token, and ``--by`` / ``$CONVERGE_USER`` naming
  someone other than the token's person is refused, as a decision's ``--by`` is;
- a refusal exits 2 with one line and records nothing; the runner recorded is
  the authenticated person, whom a four-eyes gate then refuses as its decider,
  whatever token she decides with; the inbox's fork records its caller too.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner, Result

from audit import open_store
from converge.cli import app
from converge.jobs import load_job
from converge.service import submit_run
from converge.web import create_app
from tests.keyfixtures import STORES, UNGATED, snapshot, sql, store_url
from tests.webfixtures import settle

GOVERNED = """\
name: governed
suggestors: [tests.hitlfixtures:scan, tests.hitlfixtures:count, tests.hitlfixtures:finish]
budget: {max_cycles: 10}
gates: [{hitl: {keys: [license.unknown], summary: "Classify {content[name]}",
                four_eyes: true, approvers: [legal], approvals_required: 2,
                reason_required: both}}]
initial: {seed: [1]}
"""
"""The gate of the attack: four eyes, two approvals of the legal group, reasons."""

runner = CliRunner()


@pytest.fixture(params=STORES)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with store_url(request.param, tmp_path) as u:
        yield u


@pytest.fixture
def sqlite_url(tmp_path: Path) -> Iterator[str]:
    with store_url("sqlite", tmp_path) as u:
        yield u


def cli(*args: str, token: str | None = None, user: str | None = None) -> Result:
    """``converge ARGS`` with ``$CONVERGE_TOKEN`` and ``$CONVERGE_USER`` as given (None:
    unset, whatever the environment of the tests holds)."""
    env = {"CONVERGE_TOKEN": token, "CONVERGE_USER": user}
    return runner.invoke(app, list(args), env=env)


def _token(url: str, name: str, role: str = "approver") -> str:
    res = cli("token", "add", name, "--role", role, "--db", url)
    assert res.exit_code == 0, res.output
    return res.output.split()[-1]


def _legal(url: str, *names: str) -> dict[str, str]:
    """Register ``names`` in group legal, each with an approver token (by name)."""
    for name in names:
        assert cli("user", "add", name, "--group", "legal", "--db", url).exit_code == 0
    return {name: _token(url, name) for name in names}


def _recorded(url: str) -> dict[str, Any]:
    """Everything a run, a submit, a resume or a fork would write, runners included."""
    return {**snapshot(url), "actors": sql(url, "SELECT run_id, name, action FROM run_actors")}


def _refused(res: Result, says: str) -> None:
    assert res.exit_code == 2, res.output
    assert says in res.stderr and "nothing was recorded" in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr


def _actors(url: str, run_id: str) -> list[tuple[str, str]]:
    rows = sql(url, "SELECT name, action FROM run_actors WHERE run_id = :r", r=run_id)
    return sorted((str(n), str(a)) for n, a in rows)


def test_four_eyes_holds_against_the_authenticated_runner_whatever_name_she_types(
    url: str, tmp_path: Path
) -> None:
    job = tmp_path / "gov.yaml"
    job.write_text(GOVERNED)
    tokens = _legal(url, "alice", "bob", "carol")
    assert cli("config", "set", "require-token", "true", "--db", url).exit_code == 0
    before = _recorded(url)

    nobody = cli("run", str(job), "--db", url, user="nobody-real")
    as_bob = cli("run", str(job), "--by", "bob", "--db", url, token=tokens["alice"])
    as_user = cli("run", str(job), "--db", url, token=tokens["alice"], user="nobody-real")

    _refused(nobody, "requires a token to")
    _refused(as_bob, "the token is alice's, and --by (or $CONVERGE_USER) says bob")
    _refused(as_user, "the token is alice's, and --by (or $CONVERGE_USER) says nobody-real")
    assert _recorded(url) == before

    ran = cli("run", str(job), "--db", url, "--json", token=tokens["alice"])
    assert ran.exit_code == 10, ran.output
    gate = json.loads(ran.stdout)["stop_reason"]["gate_id"]
    run_id = json.loads(ran.stdout)["run_id"]
    assert _actors(url, run_id) == [("alice", "ran")]

    own = cli("approve", gate, "--by", "alice", "--reason", "fine", "--db", url,
              token=tokens["alice"])  # fmt: skip
    assert own.exit_code == 2 and "four eyes" in own.stderr, own.output
    assert sql(url, "SELECT count(*) FROM gate_votes") == [(0,)]

    first = cli("approve", gate, "--by", "bob", "--reason", "checked", "--db", url,
                token=tokens["bob"])  # fmt: skip
    second = cli("approve", gate, "--by", "carol", "--reason", "checked", "--db", url,
                 token=tokens["carol"])  # fmt: skip
    assert (first.exit_code, second.exit_code) == (10, 0), second.output
    assert sql(url, "SELECT decided_by FROM gates") == [("bob, carol",)]
    assert cli("verify", run_id, "--db", url).exit_code == 0


def test_a_store_with_people_requires_tokens_by_default_and_false_still_needs_a_known_name(
    sqlite_url: str, tmp_path: Path
) -> None:
    url, job = sqlite_url, tmp_path / "gov.yaml"
    job.write_text(GOVERNED)
    tokens = _legal(url, "alice", "bob")
    shown = cli("config", "show", "--json", "--db", url)
    before = _recorded(url)

    no_token = cli("run", str(job), "--by", "alice", "--db", url)
    viewer = cli("run", str(job), "--db", url, token=_token(url, "victor", "viewer"))

    assert json.loads(shown.stdout) == {
        "chain-format": "1",
        "require-token": "auto",
        "retention-days": "off",
    }
    _refused(no_token, "require-token auto, and people are registered")
    assert viewer.exit_code == 2 and "victor has a viewer token" in viewer.stderr
    assert _recorded(url) == before
    proven = cli("run", str(job), "--db", url, "--json", token=tokens["alice"])
    assert proven.exit_code == 10, proven.output
    assert _actors(url, json.loads(proven.stdout)["run_id"]) == [("alice", "ran")]

    assert cli("config", "set", "require-token", "false", "--db", url).exit_code == 0
    stranger = cli("run", str(job), "--db", url, user="nobody-real")
    named = cli("run", str(job), "--db", url, "--json", user="bob")

    _refused(stranger, "'nobody-real' is not a person")
    assert named.exit_code == 10, named.output
    assert _actors(url, json.loads(named.stdout)["run_id"]) == [("bob", "ran")]


def test_without_people_anyone_runs_under_the_name_they_give_as_before(
    sqlite_url: str, tmp_path: Path
) -> None:
    url, job = sqlite_url, tmp_path / "gov.yaml"
    job.write_text(GOVERNED)

    ran = cli("run", str(job), "--db", url, "--json", user="whoever")

    assert ran.exit_code == 10, ran.output
    assert _actors(url, json.loads(ran.stdout)["run_id"]) == [("whoever", "ran")]
    assert json.loads(cli("config", "show", "--json", "--db", url).stdout) == {
        "chain-format": "1",
        "require-token": "auto",
        "retention-days": "off",
    }


def test_resume_fork_and_submit_refuse_a_runner_the_token_does_not_prove(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, job = sqlite_url, tmp_path / "budget.yaml"
    job.write_text(UNGATED)
    ran = cli("run", str(job), "--db", url, "--json", user="setup")  # before any people
    assert ran.exit_code == 3, ran.output
    run_id = json.loads(ran.stdout)["run_id"]
    tokens = _legal(url, "alice", "bob")
    sent: list[tuple[str, str]] = []

    class Queue:
        def send(self, rid: str, action: str = "run") -> None:
            sent.append((rid, action))

    monkeypatch.setattr("converge.cli.service.run_queue_for", lambda *_: Queue())
    before = _recorded(url)
    alice = tokens["alice"]

    refusals = {
        "resume": cli("resume", run_id, "--by", "bob", "--db", url, token=alice),
        "fork": cli("fork", run_id, "--at-cycle", "0", "--by", "bob", "--db", url, token=alice),
        "submit": cli("submit", str(job), "--by", "bob", "--db", url, token=alice),
        "resume without token": cli("resume", run_id, "--by", "alice", "--db", url),
        "fork by nobody": cli("fork", run_id, "--at-cycle", "0", "--db", url, user="nobody"),
        "submit with a bad token": cli("submit", str(job), "--db", url, token="cvg_forged"),
    }

    for what in ("resume", "fork", "submit"):
        _refused(refusals[what], "the token is alice's, and --by (or $CONVERGE_USER) says bob")
    _refused(refusals["resume without token"], "requires a token to")
    _refused(refusals["fork by nobody"], "requires a token to")
    bad = refusals["submit with a bad token"]
    assert bad.exit_code == 2 and "unknown, expired or revoked" in bad.stderr
    assert _recorded(url) == before and sent == []

    resumed = cli("resume", run_id, "--max-cycles", "2", "--db", url, token=alice)
    forked = cli("fork", run_id, "--at-cycle", "0", "--json", "--db", url, token=alice)
    submitted = cli("submit", str(job), "--json", "--db", url, token=tokens["bob"])

    assert resumed.exit_code == 3, resumed.output
    assert _actors(url, run_id) == [("alice", "resumed"), ("setup", "ran")]
    assert _actors(url, json.loads(forked.stdout)["run_id"]) == [("alice", "forked")]
    queued = json.loads(submitted.stdout)["run_id"]
    assert sent == [(queued, "run")] and _actors(url, queued) == [("bob", "submitted")]


def test_the_inboxs_fork_records_its_caller_whom_four_eyes_then_refuses(
    sqlite_url: str, tmp_path: Path
) -> None:
    url, job = sqlite_url, tmp_path / "gov.yaml"
    job.write_text(GOVERNED)
    ran = cli("run", str(job), "--db", url, "--json", user="setup")  # before any people
    parent = json.loads(ran.stdout)["run_id"]
    tokens = _legal(url, "alice", "bob")
    store = open_store(url)
    try:
        api = TestClient(create_app(store))
        bearer = {"Authorization": f"Bearer {tokens['alice']}"}
        forked = api.post(f"/api/runs/{parent}/fork", json={"cycle": 0}, headers=bearer)
        assert forked.status_code == 202, forked.text
        child = forked.json()["run_id"]
        settle(api.app)  # the server's workers run the fork to its gate
        [gate] = [g for g in store.gates(pending=True) if g.run_id == child]
        own = api.post(
            f"/api/gates/{gate.gate_id}/decision",
            json={"approved": True, "reason": "mine"},
            headers=bearer,
        )
    finally:
        store.close()

    assert _actors(url, child) == [("alice", "forked")]
    assert own.status_code == 403 and "four eyes" in own.json()["detail"]


def test_a_decision_in_a_store_with_people_needs_the_deciders_token_by_default(
    sqlite_url: str, tmp_path: Path
) -> None:
    url, job = sqlite_url, tmp_path / "gov.yaml"
    job.write_text(GOVERNED.replace("approvals_required: 2", "approvals_required: 1"))
    ran = cli("run", str(job), "--db", url, "--json", user="setup")  # before any people
    gate = json.loads(ran.stdout)["stop_reason"]["gate_id"]
    tokens = _legal(url, "alice")

    bare = cli("approve", gate, "--by", "alice", "--reason", "ok", "--db", url)
    proven = cli("approve", gate, "--by", "alice", "--reason", "ok", "--db", url,
                 token=tokens["alice"])  # fmt: skip

    assert bare.exit_code == 2, bare.output
    assert "require-token auto, and people are registered" in bare.stderr
    assert proven.exit_code == 0, proven.output
    assert sql(url, "SELECT decided_by FROM gates") == [("alice",)]


class _Held:
    """A run queue that keeps its messages (the run stays queued)."""

    def send(self, run_id: str, action: str = "run") -> None:
        pass


def test_cancel_checks_who_cancels_as_run_does_and_records_them(
    sqlite_url: str, tmp_path: Path
) -> None:
    job = tmp_path / "gov.yaml"
    job.write_text(GOVERNED)
    tokens = _legal(sqlite_url, "alice", "bob")
    store = open_store(sqlite_url)
    try:
        queued = submit_run(load_job(job), store, _Held())
    finally:
        store.close()

    before = snapshot(sqlite_url)
    nobody = cli("cancel", queued, "--db", sqlite_url, user="nobody-real")
    as_bob = cli("cancel", queued, "--by", "bob", "--db", sqlite_url, token=tokens["alice"])
    assert snapshot(sqlite_url) == before
    done = cli("cancel", queued, "--db", sqlite_url, token=tokens["alice"])

    _refused(nobody, "requires a token to")
    _refused(as_bob, "the token is alice's, and --by (or $CONVERGE_USER) says bob")
    assert done.exit_code == 0, done.output
    assert sql(sqlite_url, "SELECT requested_by FROM run_cancels") == [("alice",)]
