"""API tokens (``converge token add``) and ``converge serve`` as a user starts it."""

from __future__ import annotations

import hashlib
import socket
import subprocess
import sys
from pathlib import Path

import httpx
from sqlalchemy import select
from typer.testing import CliRunner

from audit import open_store
from audit.people import authenticate
from audit.tables import api_tokens
from converge.cli import app

runner = CliRunner()


def test_token_add_prints_the_token_last_and_stores_only_its_hash(tmp_path: Path) -> None:
    db = str(tmp_path / "tokens.db")

    res = runner.invoke(app, ["token", "add", "alice", "--role", "viewer", "--db", db])

    assert res.exit_code == 0, res.output
    token = res.output.split()[-1]
    assert token.startswith("cvg_") and len(token) > 40
    store = open_store(db)
    try:
        with store.transaction(write=False) as conn:
            rows = conn.execute(select(api_tokens)).all()
        assert [(r.name, r.role) for r in rows] == [("alice", "viewer")]
        assert rows[0].token_hash == hashlib.sha256(token.encode()).hexdigest()
        assert token not in Path(db).read_bytes().decode("latin-1")
        who = authenticate(store, token)
        assert who is not None and (who.name, who.role) == ("alice", "viewer")
        assert authenticate(store, token + "x") is None
    finally:
        store.close()


def test_token_add_refuses_a_bad_role_or_name(tmp_path: Path) -> None:
    db = str(tmp_path / "tokens.db")

    role = runner.invoke(app, ["token", "add", "alice", "--role", "root", "--db", db])
    name = runner.invoke(app, ["token", "add", "al ice; drop", "--db", db])

    assert (
        role.exit_code == 2
        and "--role must be one of admin, runner, approver, viewer" in role.output
    )
    assert name.exit_code == 2 and "token name 'al ice; drop'" in name.output


def test_converge_serve_answers_on_the_given_port(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    db = str(tmp_path / "serve.db")
    cmd = [sys.executable, "-m", "converge.cli", "serve", "--port", str(port), "--db", db]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        # uvicorn says so once it listens: read its log instead of polling the port
        for line in proc.stdout:
            if "Uvicorn running on" in line:
                break
        answer = httpx.get(f"http://127.0.0.1:{port}/login", timeout=30)
        unauthorised = httpx.get(f"http://127.0.0.1:{port}/api/gates", timeout=30)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert answer.status_code == 200 and "Sign in" in answer.text
    assert unauthorised.status_code == 401
