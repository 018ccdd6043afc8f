"""Trust boundaries of a keyed store and of who decides (issue 29, part B), on
SQLite and PostgreSQL:

- every writing path checks the audit key before it writes: ``approve``,
  ``reject``, ``resume`` and ``run`` with no key or a wrong one are refused, nothing
  written; so are the inbox's decisions, deadline expiry, a worker's run and the
  store's own claim and decision; ``converge serve`` and ``converge worker``
  refuse to start;
- a keyed store stays keyed: a store re-chained in plain sha256 with its
  ``key_fingerprint`` row deleted verifies for an auditor without the key, but an
  anchor (or a signed head) taken before names it keyed, and ``verify --anchor``
  says it cannot vouch for it;
- deciders are people: once anyone is registered, ``--by`` must name a known
  person; with ``require-token`` the command line needs the decider's own token,
  so one person cannot meet a two-person gate under two names.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from audit import KEY_ENV
from audit.ledger import AuditKeyError
from audit.people import add_token
from audit.signing import generate_keys
from converge.decisions import expire_due
from converge.service import execute_run
from converge.web import create_app
from engine import GateDecision
from tests.faultfixtures import opened
from tests.keyfixtures import KEY, STORES, cli, rechain, run_gated, snapshot, sql, store_url

HELD = {"no key": None, "wrong key": "not-the-stores-key"}
"""The keys a mistyped environment holds, and the problem each is refused with."""
PROBLEM = {"no key": "key required", "wrong key": "wrong key"}


@pytest.fixture(params=STORES)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with store_url(request.param, tmp_path) as u:
        yield u


def _hold(monkeypatch: pytest.MonkeyPatch, key: str | None) -> None:
    """This process's ``$CONVERGE_AUDIT_KEY`` from now on (None: unset)."""
    if key is None:
        monkeypatch.delenv(KEY_ENV, raising=False)
    else:
        monkeypatch.setenv(KEY_ENV, key)


def _refused(res: object, problem: str) -> None:
    assert getattr(res, "exit_code", None) == 2, getattr(res, "output", res)
    stderr = getattr(res, "stderr", "")
    assert problem in stderr and "nothing was written" in stderr, stderr


def _refused_then_through(
    monkeypatch: pytest.MonkeyPatch, url: str, held: str, refused: list[list[str]]
) -> None:
    """Holding ``held`` (no key, a wrong one), each command of ``refused`` (with
    ``--db url``) is refused and nothing is written; with the store's key the first
    goes through and the store verifies."""
    before = snapshot(url)
    _hold(monkeypatch, HELD[held])
    for args in refused:
        _refused(cli(*args, "--db", url), PROBLEM[held])
    assert snapshot(url) == before
    _hold(monkeypatch, KEY)
    assert cli(*refused[0], "--db", url).exit_code == 0
    assert cli("verify", "--all", "--db", url).exit_code == 0


def _decisions(url: str, tmp_path: Path) -> list[list[str]]:
    """A gated run paused: approving its gate, rejecting it."""
    gate = run_gated(url, tmp_path)
    return [["approve", gate, "--by", "alice"], ["reject", gate, "--by", "alice", "--reason", "no"]]


def _runs(url: str, tmp_path: Path) -> list[list[str]]:
    """A run stopped: resuming it, running its job again."""
    run_id = run_gated(url, tmp_path, gated=False)
    return [["resume", run_id, "--add-cycles", "5"], ["run", str(tmp_path / "trust-1-False.yaml")]]


@pytest.mark.parametrize("held", HELD)
@pytest.mark.parametrize(
    "commands",
    [pytest.param(_decisions, id="approve-reject"), pytest.param(_runs, id="resume-run")],
)
def test_writing_commands_without_the_stores_key_are_refused_with_nothing_written(
    url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    held: str,
    commands: Callable[[str, Path], list[list[str]]],
) -> None:
    _hold(monkeypatch, KEY)
    _refused_then_through(monkeypatch, url, held, commands(url, tmp_path))


@pytest.fixture
def gate(url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The gate a run paused at in the store at ``url``, written with the store's key."""
    _hold(monkeypatch, KEY)
    return run_gated(url, tmp_path)


@pytest.mark.parametrize("held", HELD)
def test_the_inbox_deadlines_workers_and_the_store_refuse_without_the_key(
    url: str, gate: str, monkeypatch: pytest.MonkeyPatch, held: str
) -> None:
    run_id = gate.rsplit("-g", 1)[0]
    _hold(monkeypatch, HELD[held])
    with opened(url) as store:
        token = add_token(store, "alice")  # tokens are not chained: no key needed
        before = snapshot(url)
        app = create_app(store)

        auth = {"Authorization": f"Bearer {token}"}
        api = TestClient(app)

        answer = api.post(f"/api/gates/{gate}/decision", json={"approved": True}, headers=auth)
        comment = api.post(f"/api/gates/{gate}/comments", json={"text": "fine"}, headers=auth)

        assert answer.status_code == 400 and PROBLEM[held] in answer.json()["detail"]
        assert comment.status_code == 400 and PROBLEM[held] in comment.json()["detail"]
        far = time.time() + 10**9
        with pytest.raises(AuditKeyError, match=PROBLEM[held]):
            expire_due(store, clock=lambda: far)
        with pytest.raises(AuditKeyError, match=PROBLEM[held]):
            execute_run(store, run_id, "resume")
        with pytest.raises(AuditKeyError, match=PROBLEM[held]):
            store.decide_gate(gate, GateDecision.approve(by="alice"), "approved")
        with pytest.raises(AuditKeyError, match=PROBLEM[held]):
            store.claim_resume(run_id)
        assert snapshot(url) == before


@pytest.mark.parametrize("held", HELD)
def test_serve_and_worker_refuse_to_start_on_a_keyed_store_without_its_key(
    url: str, gate: str, monkeypatch: pytest.MonkeyPatch, held: str
) -> None:
    # `converge worker --db` sets it: recorded by monkeypatch, so removed again after
    monkeypatch.setenv("CONVERGE_DB", "")
    monkeypatch.delenv("CONVERGE_DB")
    before = snapshot(url)
    _hold(monkeypatch, HELD[held])

    serve = cli("serve", "--db", url, "--port", "1")
    worker = cli("worker", "--broker", "amqp://guest:guest@127.0.0.1:5672//", "--db", url)
    here = cli("worker", "--run", gate.rsplit("-g", 1)[0], "--resume", "--db", url)

    for res in (serve, worker, here):
        assert res.exit_code == 2, res.output
        assert PROBLEM[held] in res.stderr and "CONVERGE_AUDIT_KEY" in res.stderr
    assert "starting converge serve" in serve.stderr
    assert "starting converge worker" in worker.stderr
    assert snapshot(url) == before


def _verify_anchor(url: str, anchor: str) -> tuple[int, dict[str, str]]:
    res = cli("verify", "--anchor", anchor, "--db", url, "--json")
    reports = json.loads(res.stdout)["runs"]
    return res.exit_code, {r["run_id"]: r["reason"] for r in reports if not r["ok"]}


def test_a_plain_rechain_with_the_key_fingerprint_deleted_is_caught_by_a_keyed_anchor(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _hold(monkeypatch, KEY)
    gate = run_gated(url, tmp_path)
    assert cli("approve", gate, "--by", "alice", "--db", url).exit_code == 0
    anchor = cli("anchor", "--db", url).stdout.strip()
    signing, _pub = generate_keys(tmp_path / "operator")
    head = cli("anchor", "--db", url, "--signing-key", str(signing)).stdout.strip()
    fingerprint = anchor.rsplit(":", 1)[1]
    assert anchor.split(":")[2] == "keyed" and json.loads(head)["keyed"] == fingerprint

    # a writer without the key: every run re-chained in plain sha256, the ledger too,
    # and the row that says the store is keyed deleted
    for (run_id,) in sql(url, "SELECT run_id FROM runs"):
        rechain(url, run_id, None)
    sql(url, "DELETE FROM converge_meta WHERE key = 'key_fingerprint'")
    _hold(monkeypatch, None)  # the auditor has no key

    assert cli("verify", "--all", "--db", url).exit_code == 0  # inside, everything fits
    for kept in (anchor, head):
        code, failed = _verify_anchor(url, kept)
        assert code == 1
        assert "cannot vouch for this store" in failed["(key)"]
        assert fingerprint in failed["(key)"] and "no longer records" in failed["(key)"]


def test_a_keyed_anchor_is_vouched_for_only_with_the_stores_key(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _hold(monkeypatch, KEY)
    run_gated(url, tmp_path)
    signing, _pub = generate_keys(tmp_path / "operator")
    anchor = cli("anchor", "--db", url).stdout.strip()
    head = cli("anchor", "--db", url, "--signing-key", str(signing)).stdout.strip()

    for kept in (anchor, head):
        _hold(monkeypatch, KEY)
        assert _verify_anchor(url, kept) == (0, {})
        _hold(monkeypatch, "not-the-stores-key")
        assert "wrong key" in _verify_anchor(url, kept)[1]["(key)"]
        _hold(monkeypatch, None)
        assert "cannot vouch" in _verify_anchor(url, kept)[1]["(key)"]


def _token(res: object) -> str:
    output = str(getattr(res, "output", ""))
    assert getattr(res, "exit_code", None) == 0, output
    return output.split()[-1]


def test_once_someone_is_registered_by_must_name_a_known_person(url: str, tmp_path: Path) -> None:
    gate = run_gated(url, tmp_path)
    assert cli("user", "add", "alice", "--db", url).exit_code == 0
    # tokens not required (by default they are once people are registered): the
    # name itself must still be a known person's
    assert cli("config", "set", "require-token", "false", "--db", url).exit_code == 0
    before = snapshot(url)

    stranger = cli("approve", gate, "--by", "mallory", "--db", url)

    assert stranger.exit_code == 2 and "'mallory' is not a person" in stranger.stderr
    assert snapshot(url) == before
    assert cli("approve", gate, "--by", "alice", "--db", url).exit_code == 0


def test_a_two_person_gate_is_not_met_by_one_person_through_the_cli_when_tokens_are_required(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CONVERGE_TOKEN", raising=False)
    gate = run_gated(url, tmp_path, required=2)
    run_id = gate.rsplit("-g", 1)[0]
    assert cli("config", "set", "require-token", "true", "--db", url).exit_code == 0
    alice = _token(cli("token", "add", "alice", "--db", url))
    bob = _token(cli("token", "add", "bob", "--db", url))
    viewer = _token(cli("token", "add", "carol", "--role", "viewer", "--db", url))

    no_token = cli("approve", gate, "--by", "mallory", "--db", url)
    first = cli("approve", gate, "--by", "alice", "--token", alice, "--db", url)
    as_another = cli("approve", gate, "--by", "mallory2", "--token", alice, "--db", url)
    as_viewer = cli("approve", gate, "--by", "carol", "--token", viewer, "--db", url)
    monkeypatch.setenv("CONVERGE_TOKEN", alice)
    again = cli("approve", gate, "--by", "alice", "--db", url)

    assert no_token.exit_code == 2 and "requires the decider's token" in no_token.stderr
    assert first.exit_code == 10, first.output  # one of two approvals
    assert as_another.exit_code == 2 and "the token is alice's" in as_another.stderr
    assert as_viewer.exit_code == 2 and "viewer token" in as_viewer.stderr
    assert again.exit_code == 2 and "already voted" in again.stderr
    assert sql(url, "SELECT voter FROM gate_votes") == [("alice",)]
    assert sql(url, "SELECT status FROM gates") == [("pending",)]
    assert sql(url, "SELECT count(*) FROM audit_events WHERE kind = 'gate_decided'") == [(0,)]

    monkeypatch.setenv("CONVERGE_TOKEN", bob)
    assert cli("approve", gate, "--by", "bob", "--db", url).exit_code == 0
    assert sql(url, "SELECT decided_by FROM gates") == [("alice, bob",)]
    assert cli("verify", run_id, "--db", url).exit_code == 0
