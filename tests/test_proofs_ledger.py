"""The ledger's RFC 6962 tree (issue 26): standard transparency-log vectors for both
verifiers, signed heads from `converge anchor`, consistency between two heads of a
growing store and its failure after a rewrite; keys; the facts root's schemes."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import stat
from pathlib import Path
from types import ModuleType

import pytest
from sqlalchemy import create_engine, text

from audit import resolve_url
from engine.hashing.merkle import (
    LEGACY,
    RFC6962,
    MerkleFrontier,
    facts_root,
    leaf_hash,
    root_of_leaves,
)
from engine.hashing.proofs import MerkleTree, verify_consistency, verify_inclusion
from tests.proofsfixtures import VERIFIER, cli, make_keys, record, signing, store_at


def _independent() -> ModuleType:
    spec = importlib.util.spec_from_file_location("verify_bundle", VERIFIER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Certificate Transparency's reference inputs and tree heads (RFC 6962 test data, as
# in the Go and Trillian suites): leaves, the root at each size 1..8, and proofs.
CT_DATA = ["", "00", "10", "2021", "3031", "40414243", "5051525354555657",
           "606162636465666768696a6b6c6d6e6f"]  # fmt: skip
CT_ROOTS = [
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]
CT_INCLUSION = [  # (index, size, path)
    (0, 8, ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
    (5, 8, ["bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
]  # fmt: skip
CT_CONSISTENCY = [  # (size1, size2, proof)
    (2, 8, ["5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
    (6, 8, ["0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
]  # fmt: skip


def test_the_tree_and_both_verifiers_meet_the_rfc6962_vectors() -> None:
    ind = _independent()
    leaves = [leaf_hash(bytes.fromhex(d)) for d in CT_DATA]
    assert leaves[0] == hashlib.sha256(b"\x00").digest()
    tree = MerkleTree(leaves)
    assert tree.root(0) == hashlib.sha256(b"").digest()
    for n in range(1, 9):
        assert tree.root(n).hex() == CT_ROOTS[n - 1]
        assert ind.tree_root(leaves[:n]).hex() == CT_ROOTS[n - 1]
    for index, size, path in CT_INCLUSION:
        proof = [bytes.fromhex(p) for p in path]
        assert tree.inclusion_proof(index, size) == proof
        root = bytes.fromhex(CT_ROOTS[size - 1])
        for verify in (verify_inclusion, ind.verify_inclusion):
            assert verify(leaves[index], index, size, proof, root)
            assert not verify(leaves[index], index + 1, size, proof, root)
            assert not verify(leaves[index], index, size, proof[:-1], root)
    for size1, size2, path in CT_CONSISTENCY:
        proof = [bytes.fromhex(p) for p in path]
        assert tree.consistency_proof(size1, size2) == proof
        r1, r2 = bytes.fromhex(CT_ROOTS[size1 - 1]), bytes.fromhex(CT_ROOTS[size2 - 1])
        for check in (verify_consistency, ind.verify_consistency):
            assert check(size1, size2, proof, r1, r2)
            assert not check(size1, size2, proof, r2, r1)
            assert not check(size1, size2, [proof[0], b"\x11" * 32, *proof[2:]], r1, r2)
            assert not check(size1 + 1, size2, proof, r1, r2)
    with pytest.raises(ValueError):
        ind.verify_inclusion(b"short", 0, 1, [], leaves[0])


def test_every_proof_of_every_small_tree_verifies_in_both() -> None:
    ind = _independent()
    leaves = [leaf_hash(bytes([i, i * 7 % 256])) for i in range(33)]
    tree = MerkleTree(leaves)
    for n in range(1, 34):
        root = tree.root(n)
        for i in range(n):
            proof = tree.inclusion_proof(i, n)
            assert verify_inclusion(leaves[i], i, n, proof, root)
            assert ind.verify_inclusion(leaves[i], i, n, proof, root)
        for m in range(1, n + 1):
            proof = tree.consistency_proof(m, n)
            assert verify_consistency(m, n, proof, tree.root(m), root)
            assert ind.verify_consistency(m, n, proof, tree.root(m), root)
        # from the empty tree no proof says anything (transparency-dev's vectors)
        assert not verify_consistency(0, n, [], tree.root(0), root)
        assert not ind.verify_consistency(0, n, [], tree.root(0), root)


def test_facts_roots_use_rfc6962_now_and_legacy_runs_keep_theirs() -> None:
    data = [f'{{"i":{i}}}'.encode() for i in range(11)]
    rfc = [hashlib.sha256(b"\x00" + d).digest() for d in data]
    assert root_of_leaves(rfc) == MerkleTree(rfc).root().hex()
    frontier = MerkleFrontier()
    frontier.extend(rfc[:4])
    frontier.extend(rfc[4:])
    assert frontier.root() == MerkleTree(rfc).root().hex()
    again = MerkleFrontier.from_json(frontier.to_json())
    assert again.scheme == RFC6962 and again.root() == frontier.root()
    old = [hashlib.sha256(d).digest() for d in data]
    legacy = MerkleFrontier.from_json([0, []])  # a checkpoint written before: LEGACY
    legacy.extend(old)
    assert legacy.scheme == LEGACY
    assert legacy.root() == root_of_leaves(old, LEGACY) == MerkleTree(old, LEGACY).root().hex()
    assert legacy.root() != frontier.root()


def test_a_run_records_its_scheme_and_its_rfc6962_root(tmp_path: Path) -> None:
    with store_at("sqlite", tmp_path) as (_url, store):
        result = record(store, 6)
        started = store.events(result.run_id, kinds=["run_started"])[0]
        assert started.payload["facts_merkle"] == RFC6962
        row = store.run(result.run_id)
        assert row.facts_root == facts_root(result.context) == result.facts_root
        assert store.verify(result.run_id).ok


def test_keys_generate_writes_a_pair_and_never_overwrites(tmp_path: Path) -> None:
    res = cli("keys", "generate", "--dir", str(tmp_path / "k"))
    assert res.exit_code == 0, res.output
    key, pub = tmp_path / "k" / "converge.key", tmp_path / "k" / "converge.pub"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert key.read_text().startswith("-----BEGIN PRIVATE KEY-----")
    assert pub.read_text().startswith("-----BEGIN PUBLIC KEY-----")
    before = key.read_bytes()
    res = cli("keys", "generate", "--dir", str(tmp_path / "k"))
    assert res.exit_code == 2 and "never overwritten" in res.output
    assert key.read_bytes() == before


def _anchor(url: str, key: Path) -> str:
    res = cli("anchor", "--db", url, "--signing-key", str(key))
    assert res.exit_code == 0, res.output
    line = res.stdout.strip()
    assert " " not in line and "\n" not in line
    return line


@pytest.mark.parametrize("backend", ["sqlite", "pg"])
def test_consistency_between_two_heads_of_a_growing_store(backend: str, tmp_path: Path) -> None:
    keys = make_keys(tmp_path / "keys")
    with store_at(backend, tmp_path) as (url, store):
        signing(store, keys)
        record(store, 2)
        head1 = _anchor(url, keys.key)
        assert _anchor(url, keys.key) == head1  # nothing new: the same signed head
        assert json.loads(head1)["type"] == "converge.ledger_head/1"
        record(store, 3)
        middle = _anchor(url, keys.key)
        record(store, 4)
        head2 = _anchor(url, keys.key)
        assert json.loads(head2)["size"] > json.loads(middle)["size"] > json.loads(head1)["size"]
        args = ["verify", "--from", head1, "--to", head2, "--public-key", str(keys.pub)]
        res = cli(*args, "--db", url)
        assert res.exit_code == 0, res.output
        assert "extends the ledger of" in res.stdout
        (tmp_path / "h1").write_text(head1)
        res = cli("verify", "--from", str(tmp_path / "h1"), "--to", head2, "--public-key",
                  str(keys.pub), "--db", url, "--json")  # fmt: skip
        assert res.exit_code == 0 and json.loads(res.stdout)["ok"]
        # the unsigned anchor and --anchor keep working beside the signed heads
        plain = cli("anchor", "--db", url).stdout.strip()
        assert cli("verify", "--anchor", plain, "--db", url).exit_code == 0
        # history rewritten between the two heads: one entry after HEAD1 and before HEAD2
        size1, size_mid = json.loads(head1)["size"], json.loads(middle)["size"]
        rewritten = size_mid + 1
        engine = create_engine(resolve_url(url))
        with engine.begin() as conn:
            conn.execute(
                text("UPDATE ledger SET head = :h WHERE seq = :s"),
                {"h": "f" * 64, "s": rewritten},
            )
        engine.dispose()
        res = cli(*args, "--db", url)
        assert res.exit_code == 1
        assert "FAILED" in res.stdout
        assert f"ledger forked after entry {size_mid}, at or before entry" in res.stdout
        assert f"ledger entry changed at entry {rewritten}" in res.stdout
        assert size1 < rewritten
        # a signed head of another key is refused, naming which
        other = make_keys(tmp_path / "other")
        res = cli("verify", "--from", head1, "--to", head2, "--public-key", str(other.pub),
                  "--db", url)  # fmt: skip
        assert res.exit_code == 1 and "HEAD1: signed by key" in res.stdout


def test_anchor_refuses_to_sign_over_a_rewritten_ledger(tmp_path: Path) -> None:
    keys = make_keys(tmp_path / "keys")
    with store_at("sqlite", tmp_path) as (url, store):
        record(store, 2)
        _anchor(url, keys.key)
        engine = create_engine(resolve_url(url))
        with engine.begin() as conn:
            conn.execute(text("UPDATE ledger SET last_seq = last_seq + 1 WHERE seq = 1"))
        engine.dispose()
        res = cli("anchor", "--db", url, "--signing-key", str(keys.key))
        assert res.exit_code == 2 and "the ledger was rewritten" in res.output


def test_verify_from_to_needs_both_heads_and_a_key(tmp_path: Path) -> None:
    with store_at("sqlite", tmp_path) as (url, store):
        record(store, 1)
    res = cli("verify", "--from", "{}", "--db", url)
    assert res.exit_code == 2 and "--from and --to go together" in res.output
    res = cli("verify", "--from", "{}", "--to", "{}", "--db", url)
    assert res.exit_code == 2 and "need --public-key" in res.output
    keys = make_keys(tmp_path / "keys")
    res = cli("verify", "--from", "nope", "--to", "{}", "--public-key", str(keys.pub), "--db", url)
    assert res.exit_code == 2 and "--from: not a signed head" in res.output
