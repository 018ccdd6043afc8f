"""Write the compatibility fixture of the current schema: a SQLite store and a
PostgreSQL dump holding the same three kinds of run as ``store-2026-11-27``.

Run it from the repository (with the project's virtualenv) when the schema version
or the bundle format moves, *before* the change, so that the code of that time
writes it::

    python -m tests.compat.make_fixture NAME      # e.g. store-2026-12-02

It writes ``tests/compat/NAME.db`` and ``tests/compat/NAME.pg.sql.gz`` (gzipped) and prints the
line to add to ``tests/compat/fixtures.json``. The runs: an oscillator stopped by
its cycle budget, and two dependency audits of ``vendored.yaml``, one paused at
its gate and one approved (``--value MIT``) and stopped at ``criteria_met``. The
jobs run from a copy of ``examples/`` in a temporary folder that is removed
afterwards, so the recorded job paths point to a folder that no longer exists (as
in any archive moved between machines). PostgreSQL: a throwaway database on
``$CONVERGE_TEST_PG_URL``'s server, dumped with ``pg_dump --no-owner``, then dropped.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from audit import SCHEMA_VERSION
from audit.proofs._bundles import FORMAT
from audit.testing import pg_url

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CONVERGE = ROOT / ".venv" / "bin" / "converge"


def _converge(args: list[str], cwd: Path, *, ok: tuple[int, ...]) -> str:
    env = {**os.environ, "PYTHONPATH": str(cwd), "CONVERGE_TOKEN": ""}
    env.pop("CONVERGE_DB", None)
    done = subprocess.run(
        [str(CONVERGE), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    if done.returncode not in ok:
        raise SystemExit(f"converge {' '.join(args)}: exit {done.returncode}\n{done.stderr}")
    return done.stdout


def record_runs(db: str, work: Path) -> None:
    """The three runs of a fixture, into the store ``db`` (a path or URL)."""
    _converge(["run", "examples/oscillator/job.yaml", "--db", db], work, ok=(3,))
    vendored = "examples/dependency_audit/vendored.yaml"
    _converge(["run", vendored, "--db", db], work, ok=(10,))
    _converge(["run", vendored, "--db", db], work, ok=(10,))
    gates = json.loads(_converge(["gates", "--pending", "--json", "--db", db], work, ok=(0,)))
    oldest = min(gates, key=lambda g: g["opened_at"])
    _converge(
        ["approve", oldest["gate_id"], "--by", "alice", "--value", "MIT", "--db", db],
        work,
        ok=(0,),
    )


def _pg_dump(url: str, out: Path) -> None:
    parsed = make_url(url)
    env = {**os.environ, "PGPASSWORD": parsed.password or ""}
    args = ["pg_dump", "--no-owner", "-h", parsed.host or "127.0.0.1"]
    args += ["-p", str(parsed.port or 5432), "-U", parsed.username or "postgres"]
    dumped = subprocess.run(
        [*args, str(parsed.database)], env=env, capture_output=True, check=True
    ).stdout
    out.write_bytes(gzip.compress(dumped, mtime=0))  # no timestamp: the same dump, the same bytes


def main(argv: list[str]) -> int:
    """Write NAME.db and NAME.pg.sql.gz (see the module docstring)."""
    if len(argv) != 1:
        raise SystemExit("usage: python -m tests.compat.make_fixture NAME")
    name = argv[0]
    with tempfile.TemporaryDirectory(prefix="converge-fixture-") as tmp:
        work = Path(tmp)
        shutil.copytree(ROOT / "examples", work / "examples")
        sqlite_out = HERE / f"{name}.db"
        sqlite_out.unlink(missing_ok=True)
        record_runs(str(sqlite_out), work)
        database = f"converge_fixture_{uuid.uuid4().hex[:10]}"
        admin = create_engine(pg_url(), isolation_level="AUTOCOMMIT")
        try:
            with admin.connect() as conn:
                conn.execute(text(f'CREATE DATABASE "{database}"'))
            url = make_url(pg_url()).set(database=database)
            rendered = url.render_as_string(hide_password=False)
            record_runs(rendered, work)
            _pg_dump(rendered, HERE / f"{name}.pg.sql.gz")
        finally:
            with admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)'))
            admin.dispose()
    line = {
        "name": name,
        "schema": SCHEMA_VERSION,
        "bundle_format": FORMAT,
        "sqlite": f"{name}.db",
        "postgresql": f"{name}.pg.sql.gz",
    }
    sys.stdout.write(json.dumps(line) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
