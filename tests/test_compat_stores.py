"""Stores written by earlier versions (tests/compat/): read without writing, upgraded
on the first write, their paused gates resumed (issue 56, item 1).

Each fixture of ``tests/compat/fixtures.json`` is read on a write-protected SQLite
copy and through a PostgreSQL role that may only ``SELECT`` (the dump loaded into a
database of the test's own, dropped afterwards with the role).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
import sqlite3
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from audit import SCHEMA_VERSION, open_store
from audit.proofs._bundles import FORMAT
from audit.testing import pg_url
from tests.faultfixtures import run_cli
from tests.pgfixtures import require_pg

COMPAT = Path(__file__).resolve().parent / "compat"
FIXTURES: list[dict[str, Any]] = json.loads((COMPAT / "fixtures.json").read_text())
OLDEST_FIXTURE_SCHEMA = 6
"""The schema of the oldest store kept (tests/compat/README.md)."""


def missing_fixtures(fixtures: list[dict[str, Any]], schema: int, bundle_format: str) -> list[str]:
    """What the fixtures lack for code of ``schema`` and ``bundle_format``: a schema
    version from the oldest kept to the code's with no fixture, or no fixture of the
    code's bundle format (each a line; empty when complete)."""
    have = {f["schema"] for f in fixtures}
    lacking = [
        f"no fixture of schema {v}: write one with the code of that version "
        "(python -m tests.compat.make_fixture NAME)"
        for v in range(OLDEST_FIXTURE_SCHEMA, schema + 1)
        if v not in have
    ]
    if not any(f["bundle_format"] == bundle_format for f in fixtures):
        lacking.append(f"no fixture of bundle format {bundle_format}")
    return lacking


def test_every_schema_version_and_bundle_format_has_a_fixture() -> None:
    assert missing_fixtures(FIXTURES, SCHEMA_VERSION, FORMAT) == []
    for fixture in FIXTURES:
        assert (COMPAT / fixture["postgresql"]).is_file()
        db = COMPAT / fixture["sqlite"]
        with closing(sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)) as conn:
            (version,) = conn.execute(
                "SELECT value FROM converge_meta WHERE key = 'schema_version'"
            ).fetchone()
        assert int(version) == fixture["schema"], fixture["name"]


def test_a_schema_or_format_moved_without_a_fixture_fails() -> None:
    assert missing_fixtures(FIXTURES, SCHEMA_VERSION + 1, FORMAT) == [
        f"no fixture of schema {SCHEMA_VERSION + 1}: write one with the code of that "
        "version (python -m tests.compat.make_fixture NAME)"
    ]
    assert missing_fixtures(FIXTURES, SCHEMA_VERSION, "converge.bundle/3") == [
        "no fixture of bundle format converge.bundle/3"
    ]


# -- the stores under test -------------------------------------------------------------


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _psql(database: str, dump: Path) -> None:
    url = make_url(pg_url())
    args = ["psql", "-h", url.host or "127.0.0.1", "-p", str(url.port or 5432)]
    args += ["-U", url.username or "postgres", "-q", "-v", "ON_ERROR_STOP=1", database]
    sql = gzip.decompress(dump.read_bytes())  # the dumps are kept gzipped (tests/compat)
    subprocess.run(args, input=sql, check=True, capture_output=True, timeout=120)


@contextmanager
def pg_database(dump: Path, *, select_only: bool) -> Iterator[str]:
    """A database of this test holding ``dump``; yields its URL, as a role that may
    only SELECT when ``select_only``. Database and role are dropped afterwards."""
    name = f"converge_compat_{uuid.uuid4().hex[:10]}"
    role = f"{name}_reader"
    admin = create_engine(pg_url(), isolation_level="AUTOCOMMIT")
    url = make_url(pg_url()).set(database=name)
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        _psql(name, dump)
        if select_only:
            with admin.connect() as conn:
                conn.execute(text(f'CREATE ROLE "{role}" LOGIN'))
            owner = create_engine(url, isolation_level="AUTOCOMMIT")
            try:
                with owner.connect() as conn:
                    conn.execute(text(f'GRANT USAGE ON SCHEMA public TO "{role}"'))
                    conn.execute(text(f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO "{role}"'))
            finally:
                owner.dispose()
            url = url.set(username=role, password=None)
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            if select_only:
                conn.execute(text(f'DROP ROLE IF EXISTS "{role}"'))
        admin.dispose()


@contextmanager
def old_store(
    fixture: dict[str, Any], kind: str, tmp_path: Path, *, read_only: bool
) -> Iterator[str]:
    """The fixture's store of ``kind`` as a URL or path: a copy (write-protected,
    ``chmod 444``, when ``read_only``), or a database of its own."""
    if kind == "sqlite":
        copy = tmp_path / fixture["sqlite"]
        shutil.copyfile(COMPAT / fixture["sqlite"], copy)
        if read_only:
            copy.chmod(0o444)
        yield str(copy)
        return
    require_pg()
    with pg_database(COMPAT / fixture["postgresql"], select_only=read_only) as url:
        yield url


def _meta(url: str) -> dict[str, str]:
    """``converge_meta`` read directly (the owner's view of a PostgreSQL store)."""
    if "://" not in url:
        with closing(sqlite3.connect(f"file:{url}?mode=ro&immutable=1", uri=True)) as conn:
            return dict(conn.execute("SELECT key, value FROM converge_meta").fetchall())
    owner = make_url(url).set(username=make_url(pg_url()).username, password=None)
    engine = create_engine(owner)
    try:
        with engine.connect() as conn:
            return {r[0]: r[1] for r in conn.execute(text("SELECT key, value FROM converge_meta"))}
    finally:
        engine.dispose()


def _cli(*args: str) -> str:
    done = run_cli(list(args))
    assert done.returncode == 0, f"converge {' '.join(args)}: {done.returncode}\n{done.stderr}"
    return done.stdout


def _runs(db: str) -> list[dict[str, Any]]:
    return list(json.loads(_cli("runs", "--json", "--db", db)))


CASES = [
    pytest.param(f, kind, id=f"{f['name']}-{kind}")
    for f in FIXTURES
    for kind in ("sqlite", "postgresql")
]


@pytest.mark.parametrize(("fixture", "kind"), CASES)
def test_an_older_store_is_audited_without_being_written(
    fixture: dict[str, Any], kind: str, tmp_path: Path
) -> None:
    with old_store(fixture, kind, tmp_path, read_only=True) as db:
        before = _digest(Path(db)) if kind == "sqlite" else None
        meta_before = _meta(db)
        runs = _runs(db)
        assert sorted(r["status"] for r in runs) == ["paused", "stopped", "stopped"]
        verified = json.loads(_cli("verify", "--all", "--json", "--db", db))
        assert verified["ok"] and len(verified["runs"]) == 3, verified
        stopped = next(r["run_id"] for r in runs if r["kind"] == "criteria_met")
        assert "criteria_met" in _cli("show", stopped, "--db", db)
        facts = json.loads(_cli("facts", stopped, "--json", "--db", db))
        assert any(f["key"] == "license" and f["content"]["spdx"] == "MIT" for f in facts)
        events = json.loads(_cli("events", stopped, "--json", "--db", db))
        assert events[-1]["kind"] == "run_stopped"
        pending = json.loads(_cli("gates", "--pending", "--json", "--db", db))
        assert [g["status"] for g in pending] == ["pending"]
        _cli("keys", "generate", "--dir", str(tmp_path / "keys"))
        bundle = tmp_path / "run.json"
        key = str(tmp_path / "keys" / "converge.key")
        _cli("export", stopped, "--proof", str(bundle), "--signing-key", key, "--db", db)
        public = str(tmp_path / "keys" / "converge.pub")
        assert "checks pass" in _cli("verify-bundle", str(bundle), "--public-key", public)
        stdlib = subprocess.run(
            [
                "python3",
                str(COMPAT.parent.parent / "examples" / "verify_bundle.py"),
                str(bundle),
                public,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert stdlib.returncode == 0, stdlib.stdout + stdlib.stderr
        # nothing was written: the same bytes, the same schema version
        if before is not None:
            assert _digest(Path(db)) == before
        assert _meta(db) == meta_before
        assert meta_before["schema_version"] == str(fixture["schema"])


@pytest.mark.parametrize(("fixture", "kind"), CASES)
def test_the_first_write_upgrades_an_older_store_and_its_gate_resumes_to_a_fresh_runs_stop(
    fixture: dict[str, Any], kind: str, tmp_path: Path
) -> None:
    with old_store(fixture, kind, tmp_path, read_only=False) as db:
        (gate,) = json.loads(_cli("gates", "--pending", "--json", "--db", db))
        # the job was recorded from a folder that is gone: the store holds the job
        paused = next(r for r in _runs(db) if r["run_id"] == gate["run_id"])
        assert paused["status"] == "paused"
        resumed = run_cli(
            ["approve", gate["gate_id"], "--by", "alice", "--value", "MIT", "--db", db]
        )
        assert resumed.returncode == 0, resumed.stderr
        assert _meta(db)["schema_version"] == str(SCHEMA_VERSION)
        after = {r["run_id"]: r for r in _runs(db)}
        verified = json.loads(_cli("verify", "--all", "--json", "--db", db))
        assert verified["ok"] and len(verified["runs"]) == 3, verified
    # the stop a fresh run of the same job reaches, decided the same way
    fresh = str(tmp_path / "fresh.db")
    started = run_cli(["run", "examples/dependency_audit/vendored.yaml", "--db", fresh])
    assert started.returncode == 10, started.stderr
    (fresh_gate,) = json.loads(_cli("gates", "--pending", "--json", "--db", fresh))
    _cli("approve", fresh_gate["gate_id"], "--by", "alice", "--value", "MIT", "--db", fresh)
    (fresh_run,) = [r for r in _runs(fresh) if r["run_id"] == fresh_gate["run_id"]]
    assert after[gate["run_id"]]["kind"] == fresh_run["kind"] == "criteria_met"
    assert after[gate["run_id"]]["status"] == "stopped"


def _as_schema_3(db: Path) -> None:
    """Make the schema-6 store ``db`` look as version 3 left it: no fencing epoch, no
    fact ids, no pending ledger heads."""
    with closing(sqlite3.connect(db, isolation_level=None)) as conn:
        conn.execute("ALTER TABLE runs DROP COLUMN epoch")
        conn.execute("ALTER TABLE audit_events DROP COLUMN fact_id")
        conn.execute("DROP TABLE ledger_pending")
        conn.execute("UPDATE converge_meta SET value = '3' WHERE key = 'schema_version'")


def test_a_store_of_schema_3_reads_through_views_of_the_missing_columns(tmp_path: Path) -> None:
    oldest = next(f for f in FIXTURES if f["schema"] == OLDEST_FIXTURE_SCHEMA)
    db = tmp_path / "v3.db"
    shutil.copyfile(COMPAT / oldest["sqlite"], db)
    _as_schema_3(db)
    db.chmod(0o444)
    before = _digest(db)
    store = open_store(str(db), read_only=True)
    try:
        assert store.read_version == 3
        reports = store.verify_all()
        assert reports and all(r.ok for r in reports), reports
        stopped = next(r.run_id for r in store.runs() if r.kind == "criteria_met")
        assert any(f.key == "license" for f in store.facts(stopped))
    finally:
        store.close()
    assert _digest(db) == before
    db.chmod(0o644)
    store = open_store(str(db))  # the first write upgrades it
    try:
        assert all(r.ok for r in store.verify_all())
    finally:
        store.close()
    assert _meta(str(db))["schema_version"] == str(SCHEMA_VERSION)
