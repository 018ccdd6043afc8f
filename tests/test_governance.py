"""Who may decide what: a gate's approvers (people and groups), four eyes, distinct
people in a quorum, required reasons, comments in the chain, refusals in the access
log, and login hardening (failure limits, expiring and revoked tokens)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING

from fastapi.testclient import TestClient
from freezegun import freeze_time
from sqlalchemy import text
from typer.testing import CliRunner

from audit.people import (
    access_entries,
    add_comment,
    add_to_groups,
    add_token,
    record_actor,
    revoke_tokens,
)
from audit.store import SqlRunStore
from converge.cli import app as cli
from converge.jobs import load_job, parse_job
from converge.web import create_app
from converge.web.limits import FailureLimiter
from engine import GateRecord
from tests.browserfixtures import screenshots_dir, sign_in
from tests.webfixtures import QUORUM_JOB, VENDORED, logged_in, run_job, served, settle

if TYPE_CHECKING:
    from playwright.sync_api import Page

runner = CliRunner()


def _gate(store: SqlRunStore, rules: str, required: int = 1) -> GateRecord:
    """A paused run of the small gated job whose gate has ``rules`` (job-file keys)."""
    run_job(parse_job(QUORUM_JOB % (required, rules), "governed.yaml"), store)
    [gate] = store.gates(pending=True)
    return gate


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _signed_in(web: TestClient, token: str) -> TestClient:
    login = web.get("/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', login.text)
    assert csrf is not None
    web.post("/login", data={"csrf": csrf.group(1), "token": token, "next": "/"})
    return web


def test_only_the_gates_approvers_see_and_decide_it(store: SqlRunStore) -> None:
    gate = _gate(store, ", approvers: [legal]")
    add_to_groups(store, "lena", ["legal"])
    outsider, member = add_token(store, "oscar"), add_token(store, "lena")
    app = create_app(store)
    api = TestClient(app)

    listed = api.get("/api/gates", headers=_bearer(outsider)).json()
    page = api.get(f"/api/gates/{gate.gate_id}", headers=_bearer(outsider))
    refused = api.post(
        f"/api/gates/{gate.gate_id}/decision", json={"approved": True}, headers=_bearer(outsider)
    )
    inbox = _signed_in(TestClient(app), outsider).get("/")
    form = _signed_in(TestClient(app), outsider)
    csrf = re.search(r'name="csrf" value="([^"]+)"', form.get("/").text)
    assert csrf is not None
    by_form = form.post(
        f"/gates/{gate.gate_id}/decision",
        data={"csrf": csrf.group(1), "decision": "approve", "reason": "ok"},
        follow_redirects=False,
    )

    assert listed == [] and gate.gate_id not in inbox.text
    assert page.status_code == 403
    assert refused.status_code == 403 and "its approvers are legal" in refused.json()["detail"]
    assert by_form.status_code == 403
    assert store.get_gate(gate.gate_id).status == "pending"
    assert store.events(gate.run_id, kinds=["gate_decided"]) == []
    assert {e.outcome for e in access_entries(store, gate.gate_id)} == {"403"}

    [mine] = api.get("/api/gates", headers=_bearer(member)).json()
    decided = api.post(
        f"/api/gates/{gate.gate_id}/decision", json={"approved": True}, headers=_bearer(member)
    )
    settle(app)
    assert mine["may_decide"] is True and decided.status_code == 202
    assert store.get_gate(gate.gate_id).decided_by == "lena"


def test_four_eyes_refuses_the_runs_own_submitter(store: SqlRunStore) -> None:
    gate = _gate(store, ", four_eyes: true")
    record_actor(store, gate.run_id, "carol", "ran")
    api = TestClient(create_app(store))

    own = api.post(
        f"/api/gates/{gate.gate_id}/decision",
        json={"approved": True},
        headers=_bearer(add_token(store, "carol")),
    )
    other = api.post(
        f"/api/gates/{gate.gate_id}/decision",
        json={"approved": True},
        headers=_bearer(add_token(store, "dave")),
    )
    settle(api.app)  # type: ignore[arg-type]

    assert own.status_code == 403 and "four eyes" in own.json()["detail"]
    assert other.status_code == 202
    assert store.get_gate(gate.gate_id).decided_by == "dave"


def test_one_person_with_two_tokens_is_one_vote_of_a_quorum(store: SqlRunStore) -> None:
    gate = _gate(store, "", required=2)
    first, second = add_token(store, "pat"), add_token(store, "pat")
    api = TestClient(create_app(store))
    url = f"/api/gates/{gate.gate_id}/decision"

    one = api.post(url, json={"approved": True}, headers=_bearer(first))
    again = api.post(url, json={"approved": True}, headers=_bearer(second))

    assert one.status_code == 200 and one.json()["still_needed"] == 1
    assert again.status_code == 409 and "pat already voted" in again.json()["detail"]
    assert store.get_gate(gate.gate_id).status == "pending"


def test_a_required_reason_is_enforced_and_can_be_waived(store: SqlRunStore) -> None:
    strict = _gate(store, ", reason_required: both")
    api = TestClient(create_app(store))
    token = add_token(store, "alice")

    bare = api.post(
        f"/api/gates/{strict.gate_id}/decision", json={"approved": True}, headers=_bearer(token)
    )
    assert bare.status_code == 422 and "reason is required to approve" in bare.json()["detail"]
    cli_reject = runner.invoke(cli, ["reject", strict.gate_id, "--by", "alice", "--db", store.url])
    assert cli_reject.exit_code == 2 and "reason is required to reject" in cli_reject.output
    assert store.get_gate(strict.gate_id).status == "pending"


def test_comments_are_on_the_page_in_the_chain_and_an_edit_fails_verify(
    store: SqlRunStore,
) -> None:
    gate = _gate(store, "")
    api = TestClient(create_app(store))
    token = add_token(store, "alice")

    made = api.post(
        f"/api/gates/{gate.gate_id}/comments",
        json={"text": "checked the vendored header"},
        headers=_bearer(token),
    )
    cli_made = runner.invoke(
        cli, ["comment", gate.gate_id, "second look: MIT", "--by", "bob", "--db", store.url]
    )
    shown = api.get(f"/api/gates/{gate.gate_id}", headers=_bearer(token)).json()

    assert made.status_code == 201 and cli_made.exit_code == 0, cli_made.output
    assert [(c["by"], c["text"]) for c in shown["comments"]] == [
        ("alice", "checked the vendored header"),
        ("bob", "second look: MIT"),
    ]
    assert len(store.events(gate.run_id, kinds=["gate_comment"])) == 2
    assert store.verify(gate.run_id).ok
    with store.transaction() as conn:
        conn.execute(
            text(
                "UPDATE audit_events SET payload = replace(payload, 'vendored', 'forged') "
                "WHERE run_id = :run AND kind = 'gate_comment'"
            ),
            {"run": gate.run_id},
        )
    report = store.verify(gate.run_id)
    assert not report.ok and report.reason == "payload changed"


def test_the_history_of_a_gate_shows_refusals_comments_and_the_decision(
    store: SqlRunStore,
) -> None:
    gate = _gate(store, ", approvers: [alice]")
    api = TestClient(create_app(store))
    api.post(
        f"/api/gates/{gate.gate_id}/decision",
        json={"approved": True},
        headers=_bearer(add_token(store, "mallory")),
    )
    runner.invoke(cli, ["comment", gate.gate_id, "looks fine", "--by", "alice", "--db", store.url])
    runner.invoke(cli, ["approve", gate.gate_id, "--by", "alice", "--db", store.url])

    shown = runner.invoke(cli, ["gates", gate.gate_id, "--history", "--json", "--db", store.url])

    kinds = [(e["kind"], e["by"]) for e in json.loads(shown.stdout)]
    assert kinds == [
        ("gate_opened", None),
        ("refused_decide", "mallory"),
        ("gate_comment", "alice"),
        ("gate_decided", "alice"),
    ]


def test_failed_tokens_are_limited_per_client_then_the_right_one_works_again(
    store: SqlRunStore,
) -> None:
    now = [1000.0]
    app = create_app(store)
    app.state.limiter = FailureLimiter(store, clock=lambda: now[0])
    api = TestClient(app)
    right = add_token(store, "alice")

    codes = [api.get("/api/gates", headers=_bearer(f"cvg_wrong{i}")).status_code for i in range(50)]
    blocked = api.get("/api/gates", headers=_bearer(right))
    now[0] += 61
    later = api.get("/api/gates", headers=_bearer(right))

    assert codes[:10] == [401] * 10 and set(codes[10:]) == {429}
    assert blocked.status_code == 429 and int(blocked.headers["Retry-After"]) <= 60
    assert later.status_code == 200
    outcomes = [e.outcome for e in access_entries(store)]
    assert outcomes.count("401") == 10 and outcomes.count("429") == 41


def test_an_expired_or_revoked_token_is_refused_at_once_open_sessions_included(
    store: SqlRunStore,
) -> None:
    with freeze_time("2026-11-26 10:00:00"):
        short = add_token(store, "temp", expires_s=3600)  # expires at 11:00
    hour_later = [1795687200.0 + 3599]  # 10:59:59 UTC
    app = create_app(store, clock=lambda: hour_later[0])
    assert TestClient(app).get("/api/gates", headers=_bearer(short)).status_code == 200
    hour_later[0] += 2
    assert TestClient(app).get("/api/gates", headers=_bearer(short)).status_code == 401
    app = create_app(store)

    token = add_token(store, "alice")
    session = _signed_in(TestClient(app), token)
    assert session.get("/", follow_redirects=False).status_code == 200
    assert revoke_tokens(store, "alice") == 1
    assert session.get("/", follow_redirects=False).status_code == 303
    assert TestClient(app).get("/api/gates", headers=_bearer(token)).status_code == 401


def test_the_session_cookie_is_httponly_strict_and_secure_over_https(
    store: SqlRunStore,
) -> None:
    token = add_token(store, "alice")
    web = TestClient(create_app(store), base_url="https://inbox.test")
    done = logged_in(web, token, "/")

    cookie = done.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "secure" in cookie


def test_the_gate_page_shows_its_approvers_and_comments_in_a_browser(
    tmp_path: Path,
    page: Page,
) -> None:
    from playwright.sync_api import expect

    from audit import open_store

    s = open_store(str(tmp_path / "governed.db"))
    try:
        vendored = load_job(str(VENDORED))
        gated = vendored.spec.gates[0].hitl
        assert gated is not None
        gated.approvers, gated.four_eyes = ["legal"], True
        run_job(vendored, s)
        [gate] = s.gates(pending=True)
        add_to_groups(s, "alice", ["legal"])
        token = add_token(s, "alice")
        add_comment(s, gate.gate_id, "bob", "The header says MIT; the repository agrees.")
        with served(s) as base:
            sign_in(page, base, token)
            page.goto(f"{base}/gates/{gate.gate_id}")
            expect(page.locator("#approvers")).to_contain_text("legal")
            expect(page.locator("#approvers")).to_contain_text("four eyes")
            page.fill("#comment", "Agreed: MIT, approving.")
            page.click("#add-comment")
            expect(page.locator("#comments .comment")).to_have_count(2)
            expect(page.locator("#comments")).to_contain_text("Agreed: MIT, approving.")
            shot = screenshots_dir(tmp_path) / "gate-governance.png"
            page.screenshot(path=str(shot), full_page=True)
        assert [e.payload["by"] for e in s.events(gate.run_id, kinds=["gate_comment"])] == [
            "bob",
            "alice",
        ]
        assert s.verify(gate.run_id).ok
    finally:
        s.close()
