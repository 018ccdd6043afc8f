"""Redaction through its surfaces (issue 56): ``converge redact`` (admins, with a
token) and ``POST /api/runs/{run}/facts/{fact}/redact``; afterwards ``verify``,
``verify --all``, ``facts`` and ``show`` show the marker, not the content. On
SQLite and PostgreSQL."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

from fastapi.testclient import TestClient
from sqlalchemy import insert

from audit import open_store
from audit.notifications._outbox import ensure_notification_tables
from audit.people import add_token, log_access
from audit.settings import CHAIN_FORMAT, set_setting
from audit.tables import notification_deliveries
from converge.web import create_app
from tests import redactionfixtures
from tests.c2spfixtures import keys_at
from tests.faultfixtures import run_cli
from tests.test_go_sumdb import _go, go_audit  # noqa: F401 (the fixture)
from tests.test_redaction import INITIAL, SECRET, _all_text, _engine, _fact_id
from tests.test_web_api import _sign_in

# the shared fixtures, by name
url = redactionfixtures.url


def _run(url: str, *, chain_format: str = "2") -> tuple[str, str, str]:
    """A stopped run, its e-mail fact's id, and an admin's token."""
    s = open_store(url)
    try:
        set_setting(s, CHAIN_FORMAT, chain_format)
        run_id = _engine(s).run(INITIAL).run_id
        return run_id, _fact_id(s, run_id, "email"), add_token(s, "ada", "admin")
    finally:
        s.close()


def test_converge_redact_needs_an_admins_token_and_leaves_every_run_verifying(url: str) -> None:
    run_id, fact_id, admin = _run(url)
    s = open_store(url)
    try:
        viewer = add_token(s, "victor", "viewer")
    finally:
        s.close()
    args = ["redact", run_id[:8], fact_id, "--reason", "GDPR art. 17", "--db", url]
    no_token = run_cli(args)
    assert no_token.returncode == 2 and "needs the token of an admin" in no_token.stderr
    refused = run_cli([*args, "--token", viewer])
    assert refused.returncode == 2 and "may not redact facts" in refused.stderr
    done = run_cli([*args, "--token", admin, "--json"])
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["by"] == "ada"
    again = run_cli([*args, "--token", admin])
    assert again.returncode == 2 and "already redacted by ada at " in again.stderr
    unknown = run_cli(["redact", run_id, "nope#3", "--reason", "x", "--token", admin, "--db", url])
    assert unknown.returncode == 2 and "no fact 'nope#3'" in unknown.stderr
    assert run_cli(["verify", run_id, "--db", url]).returncode == 0
    assert run_cli(["verify", "--all", "--db", url]).returncode == 0
    facts = run_cli(["facts", run_id, "--db", url, "--key", "email"])
    assert facts.returncode == 0, facts.stderr
    assert SECRET not in facts.stdout
    assert "redacted by ada at " in facts.stdout and "GDPR art. 17" in facts.stdout
    events = run_cli(["events", run_id, "--db", url, "--kind", "fact_redacted", "--json"])
    assert events.returncode == 0 and "fact_redacted" in events.stdout


def test_the_api_redacts_as_an_admin_and_answers_403_404_409_422(url: str) -> None:
    run_id, fact_id, admin = _run(url)
    old_run, old_fact, _ = _run(url, chain_format="1")
    s = open_store(url)
    try:
        viewer = add_token(s, "victor", "viewer")
        client = TestClient(create_app(s))

        def post(run: str, fact: str, token: str, body: object) -> tuple[int, str]:
            r = client.post(
                f"/api/runs/{run}/facts/{quote(fact, safe='')}/redact",
                json=body,
                headers={"Authorization": f"Bearer {token}"},
            )
            return r.status_code, r.text

        assert post(run_id, fact_id, viewer, {"reason": "x"})[0] == 403
        assert post(run_id, fact_id, admin, {"reason": " "})[0] == 422
        assert post(run_id, fact_id, admin, {})[0] == 422
        status, body = post(run_id, fact_id, admin, {"reason": "GDPR art. 17"})
        assert status == 200, body
        assert json.loads(body)["fact_id"] == fact_id
        status, body = post(run_id, fact_id, admin, {"reason": "again"})
        assert status == 409 and "already redacted" in body
        status, body = post(run_id, "nope#1", admin, {"reason": "x"})
        assert status == 404 and "nope#1" in body
        assert post("f" * 16, fact_id, admin, {"reason": "x"})[0] == 404
        status, body = post(old_run, old_fact, admin, {"reason": "x"})
        assert status == 409 and "chain format 1" in body
        assert s.verify(run_id).ok and s.verify(old_run).ok
    finally:
        s.close()


def test_the_bundle_of_a_redacted_run_verifies_with_the_cli_the_stdlib_script_and_go(
    url: str,
    tmp_path: Path,
    go_audit: Path,  # noqa: F811 (the fixture imported)
) -> None:
    run_id, fact_id, admin = _run(url)
    log = keys_at(tmp_path / "log")
    args = ["redact", run_id, fact_id, "--reason", "GDPR art. 17", "--token", admin]
    assert run_cli([*args, "--db", url]).returncode == 0
    bundle = tmp_path / "run.json"
    exported = run_cli(
        ["export", run_id, "--proof", str(bundle), "--signing-key", str(log.key), "--db", url]
    )
    assert exported.returncode == 0, exported.stderr
    assert json.loads(bundle.read_text("utf-8"))["format"] == "converge.bundle/3"
    checked = run_cli(["verify-bundle", str(bundle), "--public-key", str(log.pub)])
    assert checked.returncode == 0, checked.stdout
    stdlib = subprocess.run(
        [sys.executable, "examples/verify_bundle.py", str(bundle), str(log.pub)],
        cwd=Path(__file__).parent.parent,
        capture_output=True,
        text=True,
        check=False,
    )
    assert stdlib.returncode == 0, stdlib.stdout + stdlib.stderr
    code, out = _go(go_audit, "record", log.vkey, bundle)
    assert code == 0 and f"(run {run_id})" in out, out


def test_no_table_and_no_page_quotes_the_content_after_a_redaction(url: str) -> None:
    """The grep a person asking for erasure would run: no cell of any table and no
    page of the run holds the content, its quotes outside the chain scrubbed
    (``access_log.detail`` of the run, ``notification_deliveries.answer``)."""
    run_id, fact_id, admin = _run(url)
    s = open_store(url)
    try:
        contact = _fact_id(s, run_id, "contact")
        log_access(s, "redact", "403", name="victor", target=run_id, detail=f"not {SECRET}'s")
        log_access(s, "read", "403", name="victor", target=run_id, detail=f'["{SECRET}"]')
        ensure_notification_tables(s)
        with s.transaction() as conn:
            conn.execute(
                insert(notification_deliveries).values(
                    gate_id=f"{run_id}-g1",
                    event="opened",
                    sink="webhook:https://hooks.example/x",
                    run_id=run_id,
                    status="failed",
                    attempts=1,
                    answer=f"HTTP 400: unknown address {SECRET}",
                    claimed_by="w1",
                    claimed_at=1.0,
                    first_at=1.0,
                    last_at=1.0,
                )
            )
        assert SECRET in _all_text(s)
    finally:
        s.close()
    for fact in (fact_id, contact):
        args = ["redact", run_id, fact, "--reason", "GDPR art. 17", "--token", admin]
        done = run_cli([*args, "--db", url])
        assert done.returncode == 0, done.stderr
    s = open_store(url)
    try:
        assert SECRET not in _all_text(s)
        assert "not [redacted]'s" in _all_text(s)
        assert s.verify(run_id).ok and all(r.ok for r in s.verify_all())
        client = TestClient(create_app(s))
        _sign_in(client, admin)
        bearer = {"Authorization": f"Bearer {admin}"}
        for path in (f"/runs/{run_id}", f"/api/runs/{run_id}", "/runs", "/api/runs"):
            page = client.get(path, headers=bearer)
            assert page.status_code == 200, (path, page.text)
            assert SECRET not in page.text, path
        page = client.get(f"/runs/{run_id}").text  # signed in: the run's own page
        assert "fact_redacted" in page and SECRET not in page
    finally:
        s.close()
