"""Stores, keys and bundles for the proof-bundle tests (tests/test_proofs*.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from audit import SqlRunStore, open_store
from audit.signing import generate_keys, load_signer
from audit.testing import pg_schema
from converge.cli import app
from engine import Context, Engine, Proposal, RunResult, suggestor
from tests.pgfixtures import require_pg

ROOT = Path(__file__).resolve().parent.parent
VERIFIER = ROOT / "examples" / "verify_bundle.py"
runner = CliRunner()


@dataclass
class Keys:
    """A key pair in a temp dir."""

    key: Path
    pub: Path


def make_keys(directory: Path) -> Keys:
    """A new key pair written by ``generate_keys``."""
    key, pub = generate_keys(directory)
    return Keys(key, pub)


def fact_engine(store: SqlRunStore | None, n: int, name: str = "many") -> Engine:
    """An engine whose one suggestor promotes ``n`` facts ``item`` (``{"i": k}``)."""

    @suggestor(name=name, dependencies=["seed"])
    def many(ctx: Context) -> list[Proposal]:
        return [Proposal("item", {"i": k, "secret": f"content-{k}"}) for k in range(n)]

    engine = Engine(store=store)
    engine.register(many)
    return engine


def record(store: SqlRunStore, n: int = 5) -> RunResult:
    """One finished run with an input fact and ``n`` promoted facts."""
    return fact_engine(store, n).run({"seed": ["s"]})


@contextmanager
def store_at(backend: str, tmp_path: Path) -> Iterator[tuple[str, SqlRunStore]]:
    """(url, store) on SQLite in ``tmp_path`` or a fresh PostgreSQL schema (dropped after)."""
    if backend == "sqlite":
        url = str(tmp_path / "audit.db")
        store = open_store(url)
        try:
            yield url, store
        finally:
            store.close()
        return
    require_pg()
    with pg_schema("converge_proofs") as url:
        store = open_store(url)
        try:
            yield url, store
        finally:
            store.close()


def signing(store: SqlRunStore, keys: Keys) -> SqlRunStore:
    """``store`` signing the final facts roots with ``keys`` (as $CONVERGE_SIGNING_KEY does)."""
    store.signer = load_signer(keys.key)
    return store


def cli(*args: str) -> Any:
    """``converge ARGS`` in-process."""
    return runner.invoke(app, list(args))


def verify_cli(bundle: Path, keys: Keys) -> tuple[int, dict[str, Any]]:
    """``converge verify-bundle --json``: (exit code, its JSON)."""
    res = cli("verify-bundle", str(bundle), "--public-key", str(keys.pub), "--json")
    return res.exit_code, json.loads(res.stdout)


def verify_independent(bundle: Path, keys: Keys) -> tuple[int, list[tuple[str, bool]]]:
    """``python examples/verify_bundle.py`` in another process: (exit code, checks)."""
    done = subprocess.run(
        [sys.executable, str(VERIFIER), str(bundle), str(keys.pub)],
        capture_output=True,
        text=True,
        check=False,
        cwd="/",
    )
    # a failed check may say why after its name: "FAILED redactions: event seq 9: ..."
    lines = [line.split(": ", 1)[0].split(" ", 1) for line in done.stdout.splitlines() if line]
    return done.returncode, [(name, mark == "ok") for mark, name in lines]


def failed(result: dict[str, Any]) -> dict[str, str]:
    """The failing checks of a ``--json`` result: name → detail."""
    return {c["name"]: c["detail"] for c in result["checks"] if not c["ok"]}


def write(path: Path, bundle: dict[str, Any]) -> Path:
    """Write a bundle dict as JSON."""
    path.write_text(json.dumps(bundle), encoding="utf-8")
    return path
