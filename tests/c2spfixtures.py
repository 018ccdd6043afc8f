"""Helpers of the C2SP checkpoint tests (issue 44): key directories, checkpoints and
cosignatures taken through the command line, the independent verifier with a witness."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.proofsfixtures import VERIFIER, cli


@dataclass(frozen=True)
class KeyDir:
    """A directory written by ``converge keys generate``."""

    path: Path

    @property
    def key(self) -> Path:
        return self.path / "converge.key"

    @property
    def pub(self) -> Path:
        return self.path / "converge.pub"

    @property
    def vkey(self) -> Path:
        return self.path / "converge.vkey"


def keys_at(path: Path, *, witness: bool = False) -> KeyDir:
    """``converge keys generate --dir PATH`` (``--witness``)."""
    res = cli("keys", "generate", "--dir", str(path), *(["--witness"] if witness else []))
    assert res.exit_code == 0, res.output
    return KeyDir(path)


def checkpoint(url: str, log: KeyDir, out: Path, *args: str) -> str:
    """``converge checkpoint`` into ``out``; its text."""
    res = cli("checkpoint", "--db", url, "--signing-key", str(log.key), *args)
    assert res.exit_code == 0, res.output
    out.write_text(res.stdout, encoding="utf-8")
    return str(res.stdout)


def cosign(
    note: Path, state: Path, witness: KeyDir, log: KeyDir, proof: Path | None = None
) -> tuple[int, str]:
    """``converge witness cosign``: (exit code, its output)."""
    args = ["witness", "cosign", "--checkpoint", str(note), "--previous", str(state)]
    args += ["--key", str(witness.key), "--log-key", str(log.vkey)]
    res = cli(*args, *(["--proof", str(proof)] if proof else []))
    return res.exit_code, res.output


def independent(bundle: Path, pub: Path, *witness: str) -> tuple[int, dict[str, bool]]:
    """``python examples/verify_bundle.py BUNDLE PUB [--witness VKEY]``: (exit, check → ok)."""
    done = subprocess.run(
        [sys.executable, str(VERIFIER), str(bundle), str(pub), *witness],
        capture_output=True,
        text=True,
        check=False,
        cwd="/",
    )
    # a failed check may say why after its name: "FAILED redactions: event seq 9: ..."
    lines = [line.split(": ", 1)[0].split(" ", 1) for line in done.stdout.splitlines() if line]
    return done.returncode, {name: mark == "ok" for mark, name in lines}
