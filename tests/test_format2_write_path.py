"""Chain format 2's fast write path (issues 56/58): salts drawn in batches, the
commitment hashed from the salt's bytes, ``{"commitment":C}`` chained by
``fact_links``' wrap and the chunk digest's array joined once give the same bytes
as the definitions in :mod:`engine.hashing.commitment`; a run larger than one
batch of salts gets a distinct salt per fact and verifies."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from sqlalchemy import select

from audit import open_store
from audit.settings import CHAIN_FORMAT, set_setting
from audit.tables import audit_events
from audit.writing import chain_batch
from engine import Context, Engine, Proposal, suggestor
from engine._cycle.merge import SALT_BATCH
from engine.facts import Fact, Provenance, fact_json, fact_row
from engine.hashing.canonical import canonical_json
from engine.hashing.chain import GENESIS, fact_links
from engine.hashing.commitment import (
    COMMITTED_WRAP,
    commitment,
    commitments_digest,
    committed_text,
    new_salts,
    salted_commitment,
    salted_text,
    text_commitment,
)
from engine.store import PromotedFacts

TEXT = '{"confidence":1.0,"content":"é","id":"k#0","key":"k","provenance":{}}'


def test_salted_commitment_is_commitment_of_the_hex_salt() -> None:
    raw, hexed = new_salts(3)
    assert len(raw) == 96 and hexed == raw.hex()
    for i in range(3):
        salt = raw[32 * i : 32 * i + 32]
        want = hashlib.sha256(salt + TEXT.encode()).hexdigest()
        assert salted_commitment(salt, TEXT) == want
        assert commitment(hexed[64 * i : 64 * i + 64], TEXT) == want
    assert raw[:32] != raw[32:64] != raw[64:]


@pytest.mark.parametrize("key", [None, b"k" * 32])
def test_fact_links_wrap_chains_the_committed_texts(key: bytes | None) -> None:
    commits = [hashlib.sha256(bytes([i])).hexdigest() for i in range(5)]
    texts = [committed_text(c) for c in commits]
    plain = fact_links("0" * 64, 7, '"r"', 2, 1.5, texts, key)
    wrapped = fact_links("0" * 64, 7, '"r"', 2, 1.5, commits, key, COMMITTED_WRAP)
    assert wrapped == plain


def test_commitments_digest_is_the_sha256_of_their_json_array() -> None:
    commits = [hashlib.sha256(bytes([i])).hexdigest() for i in range(3)]
    for cs in ([], commits[:1], commits):
        want = hashlib.sha256(json.dumps(cs, separators=(",", ":")).encode()).hexdigest()
        assert commitments_digest(cs) == want


@suggestor(name="many", dependencies=["seed"])
def many(ctx: Context) -> list[Proposal]:
    """More facts in one effect than one batch of salts."""
    return [Proposal("n", i) for i in range(SALT_BATCH + 5)]


def test_a_run_past_one_batch_of_salts_salts_each_fact_once_and_verifies(
    tmp_path: Path,
) -> None:
    store = open_store(str(tmp_path / "f2.db"))
    try:
        set_setting(store, CHAIN_FORMAT, "2")
        engine = Engine(store=store)
        engine.register(many)
        run_id = engine.run({"seed": [1]}).run_id
        assert store.verify(run_id).ok
        with store.transaction(write=False) as conn:
            payloads = list(
                conn.execute(
                    select(audit_events.c.payload).where(
                        audit_events.c.run_id == run_id,
                        audit_events.c.kind == "fact_promoted",
                    )
                ).scalars()
            )
        salts = [json.loads(p)["salt"] for p in payloads]
        assert len(salts) == SALT_BATCH + 5 == len(set(salts))
        assert all(len(s) == 64 for s in salts)
        for p in payloads:  # each commitment from its stored text, as a verifier reads it
            body = json.loads(p)
            salt = body.pop("salt")
            assert text_commitment(p) == commitment(salt, canonical_json(body))
    finally:
        store.close()


@pytest.mark.parametrize("key", [None, b"k" * 32])
def test_a_batch_of_salted_facts_chains_as_its_events_one_by_one(key: bytes | None) -> None:
    """The write path's two forms of the same facts (a ``PromotedFacts`` batch, and
    its events one by one, as a replay or a store without batches writes them) give
    the same hashes, chunk and chunk digest."""
    raw, hexed = new_salts(4)
    batch = PromotedFacts(3, 1700000000.25)
    for i in range(4):
        fact = Fact(f"k#{i}", "k", {"n": i, "s": "é"}, 0.5, Provenance("s", 3, f"s/3/0.{i}"))
        salt, text = hexed[64 * i : 64 * i + 64], fact_json(fact)
        batch.facts.append(fact)
        batch.texts.append(salted_text(text, salt))
        batch.rows.append(canonical_json([*fact_row(fact), salt]))
        batch.commits.append(salted_commitment(raw[32 * i : 32 * i + 32], text))
    bulk = chain_batch("r1", [batch], GENESIS, 5, key)
    single = chain_batch("r1", batch.events(), GENESIS, 5, key)
    assert [r[6] for r in bulk.event_rows()] == [r[6] for r in single.event_rows()]
    assert (bulk.head, bulk.seq, bulk.promoted) == (single.head, single.seq, 4)
    assert bulk.commits == single.commits == batch.commits
    assert bulk.chunk_row() == single.chunk_row()
