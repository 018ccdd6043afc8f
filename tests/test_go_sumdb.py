"""Go's transparency-log packages check our evidence (issue 44): examples/go_audit,
built against Debian's golang.org/x/mod (golang-go, golang-golang-x-mod-dev, which
`make test` installs as root), opens our checkpoints with note.Open and checks a
run's ledger entry with tlog.CheckRecord and two checkpoints with tlog.CheckTree;
a tampered checkpoint, a wrong key and a truncated proof are refused by Go.

Without Go the test is skipped, saying so; under CI (``$CI`` set) it fails instead."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.c2spfixtures import checkpoint, cosign, keys_at
from tests.proofsfixtures import cli, record, store_at

ROOT = Path(__file__).parent.parent
GOPATH = Path("/usr/share/gocode")
SUMDB = GOPATH / "src" / "golang.org" / "x" / "mod" / "sumdb"


@pytest.fixture(scope="session")
def go_audit(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """examples/go_audit built offline against Debian's x/mod, once per session."""
    go = shutil.which("go")
    if go is None or not (SUMDB / "note").is_dir() or not (SUMDB / "tlog").is_dir():
        why = (
            "Go or golang.org/x/mod's sumdb packages are missing: apt-get install golang-go "
            "golang-golang-x-mod-dev (make test does, as root)"
        )
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    out = tmp_path_factory.mktemp("go")
    env = {
        **os.environ,
        "GOPATH": str(GOPATH),
        "GO111MODULE": "off",
        "GOPROXY": "off",
        "GOFLAGS": "",
        "GOCACHE": str(out / "cache"),
    }
    built = subprocess.run(
        [go, "build", "-o", str(out / "go_audit"), "main.go"],
        cwd=ROOT / "examples" / "go_audit",
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    return out / "go_audit"


def _go(binary: Path, *args: Path | str) -> tuple[int, str]:
    done = subprocess.run(
        [str(binary), *map(str, args)], capture_output=True, text=True, check=False
    )
    return done.returncode, done.stdout + done.stderr


def test_go_sumdb_checks_our_checkpoints_proofs_and_cosignature_and_refuses_tampering(
    go_audit: Path, tmp_path: Path
) -> None:
    log, other = keys_at(tmp_path / "log"), keys_at(tmp_path / "other")
    witness = keys_at(tmp_path / "witness", witness=True)
    old, new, proof = tmp_path / "old.note", tmp_path / "new.note", tmp_path / "old-new.proof"
    bundle = tmp_path / "run.json"
    with store_at("sqlite", tmp_path) as (url, store):
        record(store, 2)
        checkpoint(url, log, old)
        record(store, 1)
        run_id = record(store, 4).run_id
        checkpoint(url, log, new, "--from", str(old), "--proof", str(proof))
        res = cli(
            "export", run_id, "--proof", str(bundle), "--signing-key", str(log.key), "--db", url
        )
        assert res.exit_code == 0, res.output
    state = tmp_path / "last.note"
    assert cosign(new, state, witness, log)[0] == 0
    origin, size = new.read_text("utf-8").split("\n")[:2]

    # our checkpoint's signature, with our verifier key (note.Open)
    code, out = _go(go_audit, "open", log.vkey, new)
    assert code == 0 and out.startswith(f"ok: {origin} at size {size}"), out
    # the witness's cosignature too (a note.Verifier of type 0x04)
    code, out = _go(go_audit, "open", log.vkey, state, witness.vkey)
    assert code == 0, out
    code, out = _go(go_audit, "open", log.vkey, new, witness.vkey)
    assert code == 1 and "no cosignature by converge-witness/" in out
    # a run's ledger entry in the bundle's checkpoint (tlog.CheckRecord)
    code, out = _go(go_audit, "record", log.vkey, bundle)
    assert code == 0 and f"(run {run_id})" in out, out
    # the later checkpoint extends the earlier one (tlog.CheckTree)
    code, out = _go(go_audit, "tree", log.vkey, old, new, proof)
    assert code == 0 and f"extends size {old.read_text('utf-8').split()[1]}" in out, out

    # refused: a tampered checkpoint, a wrong key, truncated proofs
    tampered = tmp_path / "tampered.note"
    lines = new.read_text("utf-8").split("\n")
    lines[1] = str(int(size) + 1)
    tampered.write_text("\n".join(lines), encoding="utf-8")
    code, out = _go(go_audit, "open", log.vkey, tampered)
    assert code == 1 and "invalid signature" in out
    code, out = _go(go_audit, "open", other.vkey, new)
    assert code == 1 and "no verifiable signatures" in out
    short = tmp_path / "short.proof"
    short.write_text("\n".join(proof.read_text("utf-8").split()[:-1]), encoding="utf-8")
    code, out = _go(go_audit, "tree", log.vkey, old, new, short)
    assert code == 1 and "FAILED" in out
    cut = json.loads(bundle.read_text("utf-8"))
    assert len(cut["ledger"]["proof"]) >= 1
    cut["ledger"]["proof"] = cut["ledger"]["proof"][:-1]
    short_bundle = tmp_path / "short.json"
    short_bundle.write_text(json.dumps(cut), encoding="utf-8")
    code, out = _go(go_audit, "record", log.vkey, short_bundle)
    assert code == 1 and "FAILED" in out
