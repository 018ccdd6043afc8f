"""Every hash the store writes, pinned by fixed digests (``tests/vectors/``).

A change of canonical JSON, of an event's message, of the chain, the ledger, the
facts tree or a checkpoint's digest would re-hash every store silently while every
round-trip test still passed; these cases fail instead. Chain cases are named by
attack (``payload-bit-flip-@seq3.json``: what was done and where verify must stop).
``store-v3.sql`` is a store written by converge at schema version 3 (before fencing
epochs, before RFC 6962 facts trees): it must still open, upgrade and verify.
The RFC 6962 roots are the reference test vectors of Certificate Transparency.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from audit import open_store
from audit.chain import GENESIS, ChainRow, event_message, hasher, verify_chain
from audit.crosscheck import checkpoint_digest
from audit.ledger import entry_message
from audit.merkle import MerkleTree, leaf_hash
from audit.writer import fold_digest
from engine.facts import canonical_json, fact_from_dict, fact_json
from engine.integrity import LEGACY, RFC6962, MerkleFrontier, facts_root

VECTORS = Path(__file__).parent / "vectors"
CHAIN_CASES = sorted(
    p.name for p in VECTORS.glob("*.json") if "events" in json.loads(p.read_text("utf-8"))
)


def _load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((VECTORS / name).read_text("utf-8"))
    return data


def test_every_attack_named_by_the_issue_has_a_case() -> None:
    assert {
        "happy-path.json",
        "happy-path-keyed.json",
        "payload-bit-flip-@seq3.json",
        "row-deleted-@seq2.json",
        "relabelled-plain.json",
    } <= set(CHAIN_CASES)


@pytest.mark.parametrize("name", CHAIN_CASES)
def test_a_chain_case_verifies_or_fails_where_its_name_says(name: str) -> None:
    case = _load(name)
    key = case["key"].encode() if case["key"] else None
    rows = [
        ChainRow(e["seq"], e["kind"], e["cycle"], e["ts"], e["payload"], e["hash"])
        for e in case["events"]
    ]
    report = verify_chain(
        case["run_id"],
        rows,
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


def test_canonical_json_is_byte_exact() -> None:
    for case in _load("canonical-json.json")["cases"]:
        assert canonical_json(case["value"]) == case["canonical"]
        assert checkpoint_digest(case["canonical"]) == case["sha256"]


def test_the_facts_root_of_each_scheme_is_fixed() -> None:
    case = _load("facts-root.json")
    facts = [fact_from_dict(f) for f in case["facts"]]
    assert [fact_json(f) for f in facts] == case["fact_json"]
    assert facts_root(facts, RFC6962) == case["roots"][RFC6962]
    assert facts_root(facts, LEGACY) == case["roots"][LEGACY]
    assert facts_root([], RFC6962) == case["empty_root"]
    # the engine's incremental tree agrees with the whole-tree root
    frontier = MerkleFrontier()
    frontier.extend([leaf_hash(t.encode()) for t in case["fact_json"]])
    assert frontier.root() == case["roots"][RFC6962]


def test_the_merkle_tree_matches_rfc_6962_reference_roots() -> None:
    case = _load("rfc6962-roots.json")
    leaves = [leaf_hash(bytes.fromhex(x)) for x in case["leaves_hex"]]
    tree = MerkleTree(leaves)
    for size, root in case["roots"].items():
        assert tree.root(int(size)).hex() == root, size
        frontier = MerkleFrontier()
        frontier.extend(leaves[: int(size)])
        assert frontier.root() == root, size


def test_ledger_entries_and_the_anchor_are_fixed() -> None:
    case = _load("ledger.json")
    for chain, key in (("plain", None), ("keyed", case["key"].encode())):
        h = hasher(key)
        prev = GENESIS
        for e in case[chain]:
            prev = h(prev, entry_message(e["seq"], e["run_id"], e["last_seq"], e["head"]))
            assert prev == e["hash"], (chain, e["seq"])
    last = case["plain"][-1]
    assert case["anchor_plain"] == f"{last['seq']}:{last['hash']}"


def test_checkpoint_and_fact_chunk_digests_are_fixed() -> None:
    case = _load("checkpoint-digest.json")
    assert checkpoint_digest(case["blob"]) == case["checkpoint_digest"]
    assert [checkpoint_digest(c) for c in case["chunks"]] == case["chunk_digests"]
    folded = case["folded_from"]
    for digest in case["chunk_digests"]:
        folded = fold_digest(folded, digest)
    assert folded == case["folded"]


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
