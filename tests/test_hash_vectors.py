"""Every hash the store writes, pinned by fixed digests (``tests/vectors/``).

A change of canonical JSON, of an event's message, of the chain, the ledger, the
facts tree or a checkpoint's digest would re-hash every store silently while every
round-trip test still passed; these cases fail instead. One loader test reads every
``tests/vectors/*.json`` through the hashing core (:mod:`engine.hashing`): a file no
check reads fails it. Chain cases are named by attack (``payload-bit-flip-@seq3.json``:
what was done and where verify must stop). ``store-v3.sql`` is a store written by
converge at schema version 3 (before fencing epochs, before RFC 6962 facts trees):
it must still open, upgrade and verify. The RFC 6962 roots are the reference test
vectors of Certificate Transparency. The independent verifier
(``examples/verify_bundle.py``, which imports nothing of converge) must hash as the
core does on the same vectors.
"""

from __future__ import annotations

import ast
import base64
import hashlib
import importlib.util
import json
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from audit import open_store
from audit.trail import ChainRow, verify_chain
from engine.facts import fact_from_dict
from engine.hashing import (
    GENESIS,
    LEGACY,
    PLAIN,
    RFC6962,
    MerkleFrontier,
    MerkleTree,
    canonical_json,
    checkpoint_digest,
    entry_message,
    event_message,
    fact_json,
    fact_leaf,
    facts_root,
    fold_digest,
    hasher,
    key_fingerprint,
    leaf_hash,
    node_hash,
    parse_anchor,
    text_leaves,
    verify_consistency,
    verify_inclusion,
)
from engine.hashing.commitment import commitment, committed_payload
from engine.hashing.merkle import SALTED, commitment_leaf, root_of_leaves

ROOT = Path(__file__).parent.parent
VECTORS = Path(__file__).parent / "vectors"
ALL_CASES = sorted(p.name for p in VECTORS.glob("*.json"))
CHAIN_CASES = [n for n in ALL_CASES if "events" in json.loads((VECTORS / n).read_text("utf-8"))]


def _load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((VECTORS / name).read_text("utf-8"))
    return data


def _key(case: dict[str, Any]) -> bytes | None:
    return case["key"].encode() if case["key"] else None


def _chain_rows(case: dict[str, Any]) -> list[ChainRow]:
    return [
        ChainRow(e["seq"], e["kind"], e["cycle"], e["ts"], e["payload"], e["hash"])
        for e in case["events"]
    ]


# -- one check per kind of vector file -----------------------------------------------


def _chain_case(name: str, case: dict[str, Any]) -> None:
    """A run's events: verify stops where the name says, or every link is fixed."""
    key = _key(case)
    report = verify_chain(
        case["run_id"],
        _chain_rows(case),
        head_hash=case["head_hash"],
        last_seq=case["last_seq"],
        chain=case["chain"],
        key=key,
    )
    expect = case["expect"]
    assert report.ok is expect["ok"], report
    if not expect["ok"]:
        assert report.first_bad_seq == expect["first_bad_seq"], report
        return
    # the fixed digests: each event's hash from its exact message
    h = hasher(key)
    prev = GENESIS
    for e in case["events"]:
        message = event_message(
            json.dumps(case["run_id"]), e["seq"], e["kind"], e["cycle"], e["ts"], e["payload"]
        )
        prev = h(prev, message)
        assert prev == e["hash"], f"{name}: seq {e['seq']}"
    assert prev == case["head_hash"]


def _canonical_json(name: str, case: dict[str, Any]) -> None:
    for c in case["cases"]:
        assert canonical_json(c["value"]) == c["canonical"]
        assert checkpoint_digest(c["canonical"]) == c["sha256"]


def _facts_root(name: str, case: dict[str, Any]) -> None:
    facts = [fact_from_dict(f) for f in case["facts"]]
    assert [fact_json(f) for f in facts] == case["fact_json"]
    assert facts_root(facts, RFC6962) == case["roots"][RFC6962]
    assert facts_root(facts, LEGACY) == case["roots"][LEGACY]
    assert facts_root([], RFC6962) == case["empty_root"]
    for scheme in (RFC6962, LEGACY):
        leaves = text_leaves(case["fact_json"], scheme)
        assert leaves == [fact_leaf(f, scheme) for f in facts]
        # the engine's incremental tree agrees with the whole-tree root
        frontier = MerkleFrontier(scheme=scheme)
        frontier.extend(leaves)
        assert frontier.root() == case["roots"][scheme]
        assert MerkleTree(leaves, scheme).root().hex() == case["roots"][scheme]


def _rfc6962_roots(name: str, case: dict[str, Any]) -> None:
    leaves = [leaf_hash(bytes.fromhex(x)) for x in case["leaves_hex"]]
    tree = MerkleTree(leaves)
    for size, root in case["roots"].items():
        assert tree.root(int(size)).hex() == root, size
        frontier = MerkleFrontier()
        frontier.extend(leaves[: int(size)])
        assert frontier.root() == root, size


def _ledger(name: str, case: dict[str, Any]) -> None:
    for chain, key in (("plain", None), ("keyed", case["key"].encode())):
        h = hasher(key)
        prev = GENESIS
        for e in case[chain]:
            prev = h(prev, entry_message(e["seq"], e["run_id"], e["last_seq"], e["head"]))
            assert prev == e["hash"], (chain, e["seq"])
    last = case["plain"][-1]
    assert case["anchor_plain"] == f"{last['seq']}:{last['hash']}"
    assert parse_anchor(case["anchor_plain"]) == (last["seq"], last["hash"])


def _ledger_tree(name: str, case: dict[str, Any]) -> None:
    """The ledger's RFC 6962 tree (signed heads sign its root), and its proofs."""
    entries = case["entries"]
    leaves = [
        leaf_hash(entry_message(e["seq"], e["run_id"], e["last_seq"], e["head"]).encode())
        for e in entries
    ]
    assert [x.hex() for x in leaves] == case["leaves"]
    tree = MerkleTree(leaves)
    for size, root in case["roots"].items():
        assert tree.root(int(size)).hex() == root, size
    size = len(entries)
    top = bytes.fromhex(case["roots"][str(size)])
    for index, path in enumerate(case["inclusion"]):
        assert [p.hex() for p in tree.inclusion_proof(index, size)] == path, index
        assert verify_inclusion(leaves[index], index, size, [bytes.fromhex(p) for p in path], top)
    for size1, path in case["consistency"].items():
        assert [p.hex() for p in tree.consistency_proof(int(size1), size)] == path, size1
        root1 = bytes.fromhex(case["roots"][size1])
        assert verify_consistency(int(size1), size, [bytes.fromhex(p) for p in path], root1, top)


def _key_fingerprint(name: str, case: dict[str, Any]) -> None:
    """The key's fingerprint the store keeps (``key_fingerprint``) and anchors carry."""
    for c in case["cases"]:
        assert key_fingerprint(c["key"].encode()) == c["fingerprint"]
    assert case["anchor_keyed"].endswith(f":keyed:{case['cases'][0]['fingerprint']}")


def _checkpoint_digest(name: str, case: dict[str, Any]) -> None:
    assert checkpoint_digest(case["blob"]) == case["checkpoint_digest"]
    assert [checkpoint_digest(c) for c in case["chunks"]] == case["chunk_digests"]
    folded = case["folded_from"]
    for digest in case["chunk_digests"]:
        folded = fold_digest(folded, digest)
    assert folded == case["folded"]


def _b64(value: str | None) -> bytes:
    return base64.b64decode(value or "")


def _accepts(verify: Callable[..., bool], *args: Any) -> bool:
    """Whether ``verify`` accepts: True; False or a ValueError (a hash of the wrong
    length, in the independent verifier) is a refusal."""
    try:
        return verify(*args) is True
    except ValueError:
        return False


def _proof_outcomes(case: dict[str, Any]) -> dict[str, list[str]]:
    """Each verifier's vectors whose outcome is not the expected one (by name)."""
    vb = _independent()
    wrong: dict[str, list[str]] = {"ours": [], "independent": []}
    for kind, fns in (
        ("inclusion", (verify_inclusion, vb.verify_inclusion)),
        ("consistency", (verify_consistency, vb.verify_consistency)),
    ):
        for v in case[kind]:
            proof = [_b64(p) for p in v["proof"] or []]
            if kind == "inclusion":
                args = (_b64(v["leafHash"]), v["leafIdx"], v["treeSize"], proof, _b64(v["root"]))
            else:
                args = (v["size1"], v["size2"], proof, _b64(v["root1"]), _b64(v["root2"]))
            for who, fn in zip(("ours", "independent"), fns, strict=True):
                if _accepts(fn, *args) == v["wantErr"]:
                    wrong[who].append(v["name"])
    return wrong


def _transparency_dev(name: str, case: dict[str, Any]) -> None:
    """transparency-dev/merkle's 196 proof vectors: both verifiers decide each as it says."""
    assert len(case["inclusion"]) + len(case["consistency"]) == 196
    assert _proof_outcomes(case) == {"ours": [], "independent": []}


def _format2(name: str, case: dict[str, Any]) -> None:
    """Chain format 2: each commitment, the chained payloads, the chain (verified as
    a ``sha256/2`` run) and the facts root, by ours and by the stdlib verifier's."""
    independent = _independent().formats
    for c in case["commitments"]:
        assert commitment(c["salt"], c["fact"]) == c["commitment"]
        salted = {**json.loads(c["fact"]), "salt": c["salt"]}
        assert independent.commitment(salted) == c["commitment"]
        assert c["commitment"] != c.get("plain_sha256_of_fact")
    events = case["format2_events"]
    for e in events:
        assert committed_payload(e["kind"], e["payload"]) == e["chained"]
        assert independent.committed(e["kind"], e["payload"]) == e["chained"]
    rows = [
        ChainRow(e["seq"], e["kind"], e["cycle"], e["ts"], e["payload"], e["hash"]) for e in events
    ]
    report = verify_chain(
        case["run_id"], rows, head_hash=case["head_hash"], last_seq=3, chain="sha256/2", key=None
    )
    assert report.ok, report
    leaves = [commitment_leaf(c["commitment"]) for c in case["commitments"]]
    assert root_of_leaves(leaves, SALTED) == case["facts_root"]


CHECKS: dict[str, Callable[[str, dict[str, Any]], None]] = {
    "canonical-json.json": _canonical_json,
    "checkpoint-digest.json": _checkpoint_digest,
    "facts-root.json": _facts_root,
    "format2.json": _format2,
    "key-fingerprint.json": _key_fingerprint,
    "ledger.json": _ledger,
    "ledger-tree.json": _ledger_tree,
    "rfc6962-roots.json": _rfc6962_roots,
    "transparency-dev-proofs.json": _transparency_dev,
}
"""The check of each vector file that is not a chain case (those have ``events``)."""


@pytest.mark.parametrize("name", ALL_CASES)
def test_every_vector_file_is_read_and_its_digests_hold(name: str) -> None:
    case = _load(name)
    check = _chain_case if name in CHAIN_CASES else CHECKS.get(name)
    assert check is not None, f"no check reads tests/vectors/{name}: add one to CHECKS"
    check(name, case)


def test_both_verifiers_decide_all_196_transparency_dev_proof_vectors_as_they_say() -> None:
    case = _load("transparency-dev-proofs.json")
    assert _proof_outcomes(case) == {"ours": [], "independent": []}
    vb = _independent()
    for check in (verify_consistency, vb.verify_consistency):
        # two equal trees need no proof (a root of any length), and differ in nothing
        assert check(1, 1, [], b"don't care 2", b"don't care 2")
        assert check(5, 5, [], bytes(32), bytes(32))
        assert not check(5, 5, [], bytes(32), b"\x01" * 32)
        assert not check(5, 5, [bytes(32)], bytes(32), bytes(32))
        # from the empty tree no proof says anything: refused, as transparency-dev does
        assert not check(0, 0, [], b"", b"")
        assert not check(0, 3, [], hashlib.sha256(b"").digest(), bytes(32))


def test_every_attack_named_by_the_issue_has_a_case() -> None:
    assert {
        "happy-path.json",
        "happy-path-keyed.json",
        "payload-bit-flip-@seq3.json",
        "row-deleted-@seq2.json",
        "relabelled-plain.json",
    } <= set(CHAIN_CASES)
    assert set(CHECKS) <= set(ALL_CASES), "a check names a vector file that is gone"


def test_a_store_written_at_schema_version_3_still_verifies(tmp_path: Path) -> None:
    db = tmp_path / "v3.db"
    with sqlite3.connect(db) as conn:
        conn.executescript((VECTORS / "store-v3.sql").read_text("utf-8"))
    conn.close()
    store = open_store(str(db))
    try:
        run = store.run("v3-run")
        assert run.facts_root == "064379daf2b348c6738a1d862db54957696f3d1130e8aa01183886d413b78300"
        assert store.verify("v3-run").ok
        assert all(r.ok for r in store.verify_all())
        # a version-3 run names no facts scheme: its root is the LEGACY tree's
        facts = store.facts("v3-run")
        assert facts_root(facts, LEGACY) == run.facts_root
    finally:
        store.close()


def test_the_hashing_core_imports_the_standard_library_only() -> None:
    for path in sorted((ROOT / "engine" / "hashing").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            for module in names:
                top = module.split(".")[0]
                inside = module == "engine.hashing" or module.startswith("engine.hashing.")
                assert inside or top in sys.stdlib_module_names or top == "__future__", (
                    f"{path.name} imports {module}"
                )


# -- the independent verifier hashes as the core does ----------------------------------


def _independent() -> ModuleType:
    path = ROOT / "examples" / "verify_bundle.py"
    spec = importlib.util.spec_from_file_location("verify_bundle_vectors", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_independent_verifier_imports_nothing_of_converge() -> None:
    # its two modules: the standard library, cryptography, and each other
    beside = {"verify_formats", "examples.verify_formats"}
    for name in ("verify_bundle.py", "verify_formats.py"):
        tree = ast.parse((ROOT / "examples" / name).read_text("utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                is_import = isinstance(node, ast.Import)
                names = [a.name for a in node.names] if is_import else [node.module]
                if not is_import and node.module == "examples":
                    names = [f"examples.{a.name}" for a in node.names]
                for module in names:
                    top = (module or "").split(".")[0]
                    assert (
                        top in sys.stdlib_module_names
                        or top in ("__future__", "cryptography")
                        or module in beside
                    ), f"{name} imports {module}"


def test_the_independent_verifier_agrees_on_canonical_json_and_merkle_trees() -> None:
    vb = _independent()
    for c in _load("canonical-json.json")["cases"]:
        assert vb.canonical(c["value"]).decode() == canonical_json(c["value"])
    ct = _load("rfc6962-roots.json")
    data = [bytes.fromhex(x) for x in ct["leaves_hex"]]
    leaves = [leaf_hash(d) for d in data]
    assert [vb.leaf(d) for d in data] == leaves
    assert vb.node(leaves[0], leaves[1]) == node_hash(leaves[0], leaves[1])
    for size, root in ct["roots"].items():
        assert vb.tree_root(leaves[: int(size)]).hex() == root
    case = _load("facts-root.json")
    for scheme in (RFC6962, LEGACY):
        mine = [vb.leaf(t.encode(), scheme) for t in case["fact_json"]]
        assert mine == text_leaves(case["fact_json"], scheme)
        assert vb.tree_root(mine, scheme).hex() == case["roots"][scheme]
    assert vb.tree_root([]).hex() == case["empty_root"]


def test_the_independent_verifier_agrees_on_the_ledger_and_its_proofs() -> None:
    vb = _independent()
    case = _load("ledger-tree.json")
    entries = case["entries"]
    leaves = [vb._ledger_leaf(e) for e in entries]
    assert [x.hex() for x in leaves] == case["leaves"]
    size = len(entries)
    top = bytes.fromhex(case["roots"][str(size)])
    assert vb.tree_root(leaves) == top
    for index, path in enumerate(case["inclusion"]):
        proof = [bytes.fromhex(p) for p in path]
        assert vb.verify_inclusion(leaves[index], index, size, proof, top)
        assert verify_inclusion(leaves[index], index, size, proof, top)
        if proof:  # a tampered path fails both
            bad = [bytes(32), *proof[1:]]
            assert not vb.verify_inclusion(leaves[index], index, size, bad, top)
            assert not verify_inclusion(leaves[index], index, size, bad, top)
    for size1, path in case["consistency"].items():
        proof = [bytes.fromhex(p) for p in path]
        root1 = bytes.fromhex(case["roots"][size1])
        assert vb.verify_consistency(int(size1), size, proof, root1, top)
        assert verify_consistency(int(size1), size, proof, root1, top)


@pytest.mark.parametrize("name", CHAIN_CASES)
def test_the_independent_verifier_agrees_on_each_event_chain(name: str) -> None:
    vb = _independent()
    case = _load(name)
    rid = json.dumps(case["run_id"])
    events = [
        {**e, "ts": repr(float(e["ts"]))}  # a bundle carries the timestamp's text
        for e in case["events"]
    ]
    scan = vb.scan({"format": vb.V2, "events": events}, {"run_id": case["run_id"], "chain": PLAIN})
    # the core on the same events, numbered by position as a bundle numbers them
    h, prev, bad, messages = hasher(None), GENESIS, None, []
    for seq, e in enumerate(case["events"], 1):
        message = event_message(rid, seq, e["kind"], e["cycle"], e["ts"], e["payload"])
        messages.append(message)
        prev = h(prev, message)
        if bad is None and prev != e["hash"]:
            bad = seq
    assert scan["root"] == MerkleTree(text_leaves(messages)).root()
    assert (scan["bad"], scan["head"]) == (bad, prev)
    if case["chain"] == PLAIN and case["expect"]["ok"]:
        assert scan["head"] == case["head_hash"]


def test_the_independent_verifier_agrees_on_the_checkpoint_digest() -> None:
    vb = _independent()
    case = _load("checkpoint-digest.json")
    recorded = json.dumps({"checkpoint_sha256": checkpoint_digest(case["blob"])})
    assert vb._checkpoint(case["blob"], {"read": [("run_stopped", recorded)]})
    assert not vb._checkpoint(case["blob"] + " ", {"read": [("run_stopped", recorded)]})
