"""The ledger's checkpoints in the C2SP formats (issue 44): verifier keys as
signed-note defines them, `converge checkpoint` printing the ledger's root as a
signed tlog-checkpoint, a witness cosigning only what extends what it cosigned, and
bundles whose checkpoint and cosignature both verifiers check."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest
from cryptography.hazmat.primitives import serialization

from audit.ledger import ledger_entries, ledger_tree
from audit.signing import load_public_key, parse_note, parse_vkey, signed_by, verifier_key
from engine.errors import CheckpointError
from engine.hashing.proofs import verify_consistency
from tests.c2spfixtures import checkpoint, cosign, independent, keys_at
from tests.proofsfixtures import cli, record, store_at

# the example of c2sp.org/signed-note ("Verifier keys", "Example")
SPEC_VKEY = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"
SPEC_NOTE = (
    "This is an example message.\n\n\u2014 example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6T"
    "fXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n"
)


def _formats() -> ModuleType:
    path = Path(__file__).parent.parent / "examples" / "verify_formats.py"
    spec = importlib.util.spec_from_file_location("verify_formats_c2sp", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _raw(pub: Path) -> bytes:
    return load_public_key(pub).public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )


def test_the_c2sp_example_note_verifies_with_its_key_in_both_implementations() -> None:
    vkey = parse_vkey(SPEC_VKEY)
    assert vkey.text() == SPEC_VKEY
    note = parse_note(SPEC_NOTE)
    assert note.render() == SPEC_NOTE
    assert signed_by(note, vkey) is None
    tampered = parse_note(SPEC_NOTE.replace("an example", "an exemple"))
    assert signed_by(tampered, vkey) == "the signature by example.com/foo does not verify"
    vf = _formats()
    assert vf.signed(SPEC_NOTE, vf.parse_vkey(SPEC_VKEY))
    assert not vf.signed(SPEC_NOTE.replace("an example", "an exemple"), vf.parse_vkey(SPEC_VKEY))
    with pytest.raises(CheckpointError, match="key hash"):
        parse_vkey(SPEC_VKEY.replace("+530d903a+", "+530d903b+"))
    for bad in ("no signatures\n", "text\n\nno dash line\n", "text\n\n\u2014 name !!!\n"):
        with pytest.raises(CheckpointError, match="not a signed note"):
            parse_note(bad)


def test_keys_generate_writes_the_verifier_key_whose_hash_c2sp_defines(tmp_path: Path) -> None:
    for witness, kind in ((False, 0x01), (True, 0x04)):
        keys = keys_at(tmp_path / str(kind), witness=witness)
        raw = _raw(keys.pub)
        text = keys.vkey.read_text("utf-8")
        assert text.endswith("\n") and text.count("\n") == 1
        name, key_hash, material = text.strip().split("+", 2)
        prefix = "converge-witness/" if witness else "converge/"
        assert name == prefix + hashlib.sha256(raw).hexdigest()[:16]
        assert base64.b64decode(material) == bytes([kind]) + raw
        expected = hashlib.sha256(name.encode() + b"\n" + bytes([kind]) + raw).digest()[:4]
        assert bytes.fromhex(key_hash) == expected
        assert parse_vkey(text).key_hash == expected
    # an existing key is never overwritten
    again = cli("keys", "generate", "--dir", str(tmp_path / "1"))
    assert again.exit_code == 2 and "exists already" in again.output


@pytest.mark.parametrize("backend", ["sqlite", "pg"])
def test_converge_checkpoint_prints_the_ledger_root_as_a_signed_checkpoint(
    backend: str, tmp_path: Path
) -> None:
    log = keys_at(tmp_path / "log")
    with store_at(backend, tmp_path) as (url, store):
        record(store, 3)
        first = checkpoint(url, log, tmp_path / "1.note")
        tree = ledger_tree(ledger_entries(store))
        origin, size, root, blank, line, end = first.split("\n")
        assert origin.startswith("converge/store-") and len(origin) == len("converge/store-") + 16
        assert (int(size), base64.b64decode(root)) == (tree.size, tree.root())
        assert (blank, end) == ("", "")
        vkey = verifier_key(load_public_key(log.pub))
        assert line.startswith(f"\u2014 {vkey.name} ")
        assert signed_by(parse_note(first), vkey) is None
        # the same store, size and key: the same bytes (a stable origin, Ed25519)
        assert checkpoint(url, log, tmp_path / "again.note") == first
        named = checkpoint(url, log, tmp_path / "named.note", "--origin", "example.org/audit")
        assert named.startswith(f"example.org/audit\n{size}\n{root}\n\n")
        record(store, 2)
        proof_file = tmp_path / "1-2.proof"
        second = checkpoint(
            url, log, tmp_path / "2.note", "--from", str(tmp_path / "1.note"),
            "--proof", str(proof_file),
        )  # fmt: skip
    size2, root2 = second.split("\n")[1:3]
    proof = [base64.b64decode(p) for p in proof_file.read_text("utf-8").split()]
    assert int(size2) > int(size)
    old, new = base64.b64decode(root), base64.b64decode(root2)
    assert verify_consistency(int(size), int(size2), proof, old, new)


def test_checkpoint_refuses_from_without_proof_and_an_origin_with_a_space(tmp_path: Path) -> None:
    log = keys_at(tmp_path / "log")
    with store_at("sqlite", tmp_path) as (url, store):
        record(store, 1)
        note = tmp_path / "1.note"
        checkpoint(url, log, note)
        key = ["--signing-key", str(log.key), "--db", url]
        res = cli("checkpoint", "--from", str(note), *key)
        assert res.exit_code == 2 and "--from and --proof go together" in res.output
        res = cli("checkpoint", "--origin", "two words", *key)
        assert res.exit_code == 2 and "without spaces" in res.output
        # no signing key: the last checkpoint kept (issue 59: tests/test_third_day_commands.py)
        kept = cli("checkpoint", "--db", url)
        assert kept.exit_code == 0 and kept.stdout == note.read_text(encoding="utf-8")


def test_checkpoint_signs_with_the_key_named_by_converge_signing_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = keys_at(tmp_path / "log")
    with store_at("sqlite", tmp_path) as (url, store):
        record(store, 2)
        given = checkpoint(url, log, tmp_path / "given.note")
        monkeypatch.setenv("CONVERGE_SIGNING_KEY", str(log.key))
        res = cli("checkpoint", "--db", url)
    assert res.exit_code == 0, res.output
    assert res.stdout == given  # the same key from the environment: the same note
    vkey = verifier_key(load_public_key(log.pub))
    assert signed_by(parse_note(res.stdout), vkey) is None


def test_a_witness_cosigns_only_a_checkpoint_that_extends_the_last_it_cosigned(
    tmp_path: Path,
) -> None:
    log, other = keys_at(tmp_path / "log"), keys_at(tmp_path / "other")
    witness = keys_at(tmp_path / "witness", witness=True)
    state = tmp_path / "witness" / "last.note"
    with store_at("sqlite", tmp_path) as (url, store):
        record(store, 2)
        one = checkpoint(url, log, tmp_path / "1.note")
        code, out = cosign(tmp_path / "1.note", state, witness, log)  # the first: as it is
        assert code == 0, out
        assert out.startswith(one) and state.read_text("utf-8") == out
        # the cosignature line, byte by byte (c2sp.org/tlog-cosignature)
        name, b64 = out.split("\n")[-2].removeprefix("\u2014 ").split(" ")
        raw, pub = base64.b64decode(b64), _raw(witness.pub)
        assert name == "converge-witness/" + hashlib.sha256(pub).hexdigest()[:16]
        assert raw[:4] == hashlib.sha256(name.encode() + b"\n\x04" + pub).digest()[:4]
        assert len(raw) == 4 + 8 + 64
        when = int.from_bytes(raw[4:12], "big")
        body = one[: one.index("\n\n") + 1].encode()
        load_public_key(witness.pub).verify(raw[12:], b"cosignature/v1\ntime %d\n" % when + body)
        record(store, 2)
        p12 = tmp_path / "1-2.proof"
        checkpoint(
            url, log, tmp_path / "2.note", "--from", str(tmp_path / "1.note"), "--proof", str(p12)
        )
        assert cosign(tmp_path / "2.note", state, witness, log, p12)[0] == 0
        cosigned_two = state.read_text("utf-8")
        # an older checkpoint, a wrong proof, another log's key: refused, state kept
        code, out = cosign(tmp_path / "1.note", state, witness, log, p12)
        assert code == 1 and "smaller than the size" in out
        record(store, 1)
        p23 = tmp_path / "2-3.proof"
        checkpoint(
            url, log, tmp_path / "3.note", "--from", str(tmp_path / "2.note"), "--proof", str(p23)
        )
        lines = p23.read_text("utf-8").split("\n")
        bad = tmp_path / "bad.proof"
        bad.write_text(base64.b64encode(bytes(32)).decode() + "\n" + "\n".join(lines[1:]))
        code, out = cosign(tmp_path / "3.note", state, witness, log, bad)
        assert code == 1 and "the proof does not show" in out
        checkpoint(url, other, tmp_path / "other.note")
        code, out = cosign(tmp_path / "other.note", state, witness, log, p23)
        assert code == 1 and "not the log's" in out
        assert state.read_text("utf-8") == cosigned_two
        # a state file swapped for a checkpoint this witness never cosigned: refused
        swapped = tmp_path / "swapped.note"
        swapped.write_text((tmp_path / "2.note").read_text("utf-8"))
        code, out = cosign(tmp_path / "3.note", swapped, witness, log, p23)
        assert code == 1 and "no cosignature by witness" in out
        assert cosign(tmp_path / "3.note", state, witness, log, p23)[0] == 0


def test_a_bundle_carries_its_checkpoint_and_a_witness_cosignature_is_required_on_demand(
    tmp_path: Path,
) -> None:
    log, witness = keys_at(tmp_path / "log"), keys_at(tmp_path / "witness", witness=True)
    state, bundle = tmp_path / "last.note", tmp_path / "run.json"
    with store_at("sqlite", tmp_path) as (url, store):
        record(store, 2)
        run_id = record(store, 3).run_id
        db = ["--signing-key", str(log.key), "--db", url]
        assert cli("export", run_id, "--proof", str(bundle), *db).exit_code == 0
        checkpoint(url, log, tmp_path / "cp.note")
        assert cosign(tmp_path / "cp.note", state, witness, log)[0] == 0
        cosigned = tmp_path / "cosigned.json"
        res = cli("export", run_id, "--proof", str(cosigned), "--checkpoint", str(state), *db)
        assert res.exit_code == 0, res.output
    data = json.loads(bundle.read_text("utf-8"))
    note = data["ledger_checkpoint"]
    head = data["signed_head"]
    assert note.split("\n")[1:3] == [
        str(head["size"]),
        base64.b64encode(bytes.fromhex(head["root"])).decode(),
    ]
    assert json.loads(cosigned.read_text("utf-8"))["ledger_checkpoint"] == state.read_text("utf-8")
    w = ["--witness", str(witness.vkey)]

    def both(path: Path, *args: str) -> dict[str, bool]:
        res = cli("verify-bundle", str(path), "--public-key", str(log.pub), *args, "--json")
        ours = {c["name"]: c["ok"] for c in json.loads(res.stdout)["checks"]}
        code, theirs = independent(path, log.pub, *args)
        assert theirs == ours and (code == 0) == (res.exit_code == 0) == all(ours.values())
        return ours

    assert both(bundle)["ledger checkpoint"]
    assert both(bundle, *w)["witness cosignature"] is False
    assert all(both(cosigned, *w).values())
    assert both(cosigned, "--witness", witness.vkey.read_text("utf-8").strip())[
        "witness cosignature"
    ]
    # a cosignature altered, or a checkpoint of another root: each named by its check
    altered = json.loads(cosigned.read_text("utf-8"))
    text = altered["ledger_checkpoint"]
    last = text.rstrip("\n").rsplit(" ", 1)[1]
    flipped = last[:20] + ("A" if last[20] != "A" else "B") + last[21:]
    altered["ledger_checkpoint"] = text.replace(last, flipped)
    path = tmp_path / "altered.json"
    path.write_text(json.dumps(altered), encoding="utf-8")
    result = both(path, *w)
    assert result["ledger checkpoint"] and not result["witness cosignature"]
    lines = text.split("\n")
    lines[2] = base64.b64encode(bytes(32)).decode()
    altered["ledger_checkpoint"] = "\n".join(lines)
    path.write_text(json.dumps(altered), encoding="utf-8")
    result = both(path, *w)
    assert not result["ledger checkpoint"] and not result["witness cosignature"]
