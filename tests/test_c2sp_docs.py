"""The byte-exact checkpoint example of docs/audit-format.md (issue 44): the keys it
names sign and cosign exactly its bytes, and both verifiers accept it."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from audit.ledger import Checkpoint, parse_checkpoint
from audit.signing import (
    COSIGNATURE,
    Signer,
    cosign,
    cosigned_at,
    parse_note,
    parse_vkey,
    sign_note,
    signed_by,
    verifier_key,
)

ROOT = Path(__file__).parent.parent
DOC = (ROOT / "docs" / "audit-format.md").read_text("utf-8")


def _blocks() -> list[str]:
    """The ```text blocks of the C2SP section, in order."""
    section = DOC[DOC.index("## Checkpoints in the C2SP formats") :]
    return re.findall(r"```text\n(.*?)```", section, re.S)


def _signer(seed: bytes) -> Signer:
    return Signer(Ed25519PrivateKey.from_private_bytes(hashlib.sha256(seed).digest()))


def test_the_documented_checkpoint_is_byte_for_byte_what_its_keys_sign() -> None:
    note_text, vkeys = _blocks()[:2]
    log, witness = _signer(b"converge docs: log key"), _signer(b"converge docs: witness key")
    assert vkeys.split("\n")[:2] == [
        verifier_key(log.public).text(),
        verifier_key(witness.public, COSIGNATURE).text(),
    ]
    tree = json.loads((ROOT / "tests" / "vectors" / "ledger-tree.json").read_text("utf-8"))
    size = len(tree["entries"])
    root = bytes.fromhex(tree["roots"][str(size)])
    checkpoint, note = parse_checkpoint(note_text)
    assert checkpoint == Checkpoint(checkpoint.origin, size, root)
    made = cosign(sign_note(checkpoint.text(), log), witness, 1767225600)
    assert made.render() == note_text
    log_vkey, witness_vkey = (parse_vkey(v) for v in vkeys.split("\n")[:2])
    assert signed_by(note, log_vkey) is None
    assert cosigned_at(note, witness_vkey) == 1767225600
    # the independent verifier's formats module agrees
    path = ROOT / "examples" / "verify_formats.py"
    spec = importlib.util.spec_from_file_location("verify_formats_docs", path)
    assert spec is not None and spec.loader is not None
    vf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(vf)
    assert vf.signed(note_text, vf.parse_vkey(vkeys.split("\n")[0]))
    assert vf.cosigned(note_text, vf.parse_vkey(vkeys.split("\n")[1]))
    assert not vf.cosigned(note_text.replace("\n7\n", "\n8\n"), vf.parse_vkey(vkeys.split("\n")[1]))
    assert parse_note(note_text).render() == note_text
