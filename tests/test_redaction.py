"""Redaction (issue 56, last item): a fact's content erased from a run of chain
format 2, its salted commitment kept, and every proof of the run still valid. On
SQLite and PostgreSQL."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from sqlalchemy import func, inspect, select, text, update

from audit import SqlRunStore, redact_fact
from audit.proofs import export_fact, export_run, verify_bundle
from audit.redaction import redaction_note
from audit.settings import CHAIN_FORMAT, set_setting
from audit.signing import Signer
from audit.tables import audit_events, runs
from engine import Context, Engine, Proposal, suggestor
from engine.errors import FactNotFound, RedactionError
from engine.hashing.canonical import canonical_json
from engine.hashing.commitment import commitment, text_commitment
from examples import verify_bundle as stdlib
from gates import require_approval
from tests.hitlfixtures import STORES, opened_store

SECRET = "alice.secret@example.com"
"""The content a person asked to erase."""

SHORT = "yes"
"""A short value: its commitment must not be its plain hash."""


@suggestor(name="find", dependencies=["seed"])
def find(ctx: Context) -> list[Proposal]:
    """Finds a person's e-mail, a short answer and a package."""
    return [
        Proposal("email", SECRET),
        Proposal("answer", SHORT),
        Proposal("package", "a"),
    ]


@suggestor(name="tally", dependencies=["package"])
def tally(ctx: Context) -> list[Proposal]:
    """Counts the packages (gated when ``gated``: the run pauses)."""
    return [Proposal("tally", ctx.count("package"))]


def _engine(store: SqlRunStore, *, gated: bool = False) -> Engine:
    gates = [require_approval(keys=["tally"], summary="tally")] if gated else []
    engine = Engine(store=store, gates=gates)
    engine.register(find, tally)
    return engine


INITIAL: dict[str, list[Any]] = {"seed": [1], "contact": [SECRET]}


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqlRunStore]:
    for s in opened_store(request.param, tmp_path):
        set_setting(s, CHAIN_FORMAT, "2")
        yield s


def _fact_id(store: SqlRunStore, run_id: str, key: str) -> str:
    (fact,) = [f for f in store.facts(run_id) if f.key == key]
    return fact.id


def _all_text(store: SqlRunStore) -> str:
    """Every cell of every table, as text (what a person grepping the store sees)."""
    out: list[str] = []
    with store.transaction(write=False) as conn:
        for name in inspect(conn).get_table_names():
            for row in conn.execute(text(f'SELECT * FROM "{name}"')):
                out.extend(str(v) for v in row)
    return "\n".join(out)


def _ok(store: SqlRunStore, run_id: str) -> None:
    report = store.verify(run_id)
    assert report.ok, report
    assert all(r.ok for r in store.verify_all()), store.verify_all()


def test_a_store_of_format_2_chains_salted_commitments_and_verifies(store: SqlRunStore) -> None:
    run_id = _engine(store).run(INITIAL).run_id
    _ok(store, run_id)
    with store.transaction(write=False) as conn:
        chain = conn.execute(select(runs.c.chain).where(runs.c.run_id == run_id)).scalar()
        payloads = conn.execute(
            select(audit_events.c.payload).where(
                audit_events.c.run_id == run_id, audit_events.c.kind == "fact_promoted"
            )
        ).scalars()
        stored = [json.loads(p) for p in payloads]
    assert chain == "sha256/2"
    assert all(len(p["salt"]) == 64 for p in stored)
    assert len({p["salt"] for p in stored}) == len(stored)


def test_a_short_value_is_not_guessable_from_its_commitment(store: SqlRunStore) -> None:
    run_id = _engine(store).run(INITIAL).run_id
    with store.transaction(write=False) as conn:
        payload = conn.execute(
            select(audit_events.c.payload).where(
                audit_events.c.run_id == run_id,
                audit_events.c.fact_id == json.dumps(_fact_id(store, run_id, "answer")),
            )
        ).scalar_one()
    data = json.loads(payload)
    c = text_commitment(payload)
    body = canonical_json({k: v for k, v in data.items() if k != "salt"})
    assert c == commitment(data["salt"], body)
    assert c not in {
        hashlib.sha256(body.encode()).hexdigest(),
        hashlib.sha256(json.dumps(SHORT).encode()).hexdigest(),
        hashlib.sha256(SHORT.encode()).hexdigest(),
    }


def test_redact_erases_the_content_everywhere_and_every_proof_still_verifies(
    store: SqlRunStore,
) -> None:
    run_id = _engine(store).run(INITIAL).run_id
    head_before = store.run(run_id).facts_root
    promoted = _fact_id(store, run_id, "email")
    initial = _fact_id(store, run_id, "contact")
    assert SECRET in _all_text(store)
    done = redact_fact(store, run_id, promoted, by="alice", reason="GDPR art. 17 request #12")
    redact_fact(store, run_id, initial, by="alice", reason="GDPR art. 17 request #12")
    assert SECRET not in _all_text(store)
    _ok(store, run_id)
    assert store.run(run_id).facts_root == head_before
    facts = {f.id: f for f in store.facts(run_id)}
    note = redaction_note(facts[promoted].content)
    assert note is not None and note.startswith("redacted by alice at ")
    assert note.endswith(": GDPR art. 17 request #12")
    assert facts[_fact_id(store, run_id, "package")].content == "a"
    events = [e for e in store.events(run_id) if e.kind == "fact_redacted"]
    assert [e.payload["fact_id"] for e in events] == [promoted, initial]
    assert events[0].payload["commitment"] == done.commitment
    assert (events[0].payload["by"], events[0].seq) == ("alice", done.seq)


def test_redacting_twice_an_unknown_fact_or_a_format_1_run_is_refused(
    store: SqlRunStore,
) -> None:
    run_id = _engine(store).run(INITIAL).run_id
    fact_id = _fact_id(store, run_id, "email")
    redact_fact(store, run_id, fact_id, by="alice", reason="request")
    with pytest.raises(RedactionError, match=f"fact {fact_id} of run {run_id} is already redacted"):
        redact_fact(store, run_id, fact_id, by="bob", reason="again")
    with pytest.raises(FactNotFound, match="no fact 'nothing#9'") as caught:
        redact_fact(store, run_id, "nothing#9", by="alice", reason="request")
    assert caught.value.fact_id == "nothing#9"
    with pytest.raises(RedactionError, match="needs a reason"):
        redact_fact(store, run_id, fact_id, by="alice", reason="  ")
    set_setting(store, CHAIN_FORMAT, "1")
    old = _engine(store).run(INITIAL).run_id
    with pytest.raises(RedactionError, match=r"chain format 1 \(sha256\)"):
        redact_fact(store, old, _fact_id(store, old, "email"), by="alice", reason="request")
    _ok(store, old)


def test_a_paused_run_with_a_redacted_fact_resumes_to_its_stop(store: SqlRunStore) -> None:
    result = _engine(store, gated=True).run(INITIAL)
    assert result.stop_reason.is_hitl_pending()
    run_id = result.run_id
    for key in ("email", "contact"):
        redact_fact(store, run_id, _fact_id(store, run_id, key), by="alice", reason="request")
    _ok(store, run_id)
    (gate,) = [g for g in store.gates(pending=True) if g.run_id == run_id]
    resumed = _engine(store, gated=True).resume(gate.gate_id, _approve())
    assert not resumed.stop_reason.is_hitl_pending()
    _ok(store, run_id)
    assert SECRET not in _all_text(store)
    facts = {f.key: f for f in store.facts(run_id)}
    assert redaction_note(facts["email"].content) is not None
    assert facts["tally"].content == 1


def _approve() -> Any:
    from engine.hitl import GateDecision

    return GateDecision.approve(by="bob")


def _stdlib_ok(bundle: dict[str, Any], signer: Signer, tmp_path: Path, name: str) -> bool:
    """The stdlib verifier (examples/verify_bundle.py) on ``bundle``: every check passes."""
    path, pem = tmp_path / f"{name}.json", tmp_path / "key.pub"
    path.write_text(json.dumps(bundle))
    pem.write_bytes(signer.public.public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo))
    return stdlib.main([str(path), str(pem)]) == 0


def test_bundles_of_a_redacted_run_verify_and_name_their_format(
    store: SqlRunStore, tmp_path: Path
) -> None:
    signer = Signer(Ed25519PrivateKey.generate())
    run_id = _engine(store, gated=True).run(INITIAL).run_id  # paused: its checkpoint kept
    before = export_run(store, signer, run_id)
    fact_id = _fact_id(store, run_id, "email")
    for key in ("email", "contact"):
        redact_fact(store, run_id, _fact_id(store, run_id, key), by="alice", reason="request")
    after = export_run(store, signer, run_id)
    one = export_fact(store, signer, run_id, fact_id)
    for name, bundle in (("before", before), ("after", after), ("one", one)):
        assert bundle["format"] == "converge.bundle/3" and bundle["run"]["chain"] == "sha256/2"
        checks = verify_bundle(bundle, signer.public)
        assert all(c.ok for c in checks), (name, checks)
        assert _stdlib_ok(bundle, signer, tmp_path, name), name
    assert SECRET not in json.dumps(after) and SECRET in json.dumps(before)
    assert after["run"]["facts_root"] == before["run"]["facts_root"]
    assert after["checkpoint"] is not None
    # the content changed without the salt's commitment: every verifier says so
    tampered = json.loads(json.dumps(before))
    (event,) = [e for e in tampered["events"] if fact_id in e["payload"]]
    event["payload"] = event["payload"].replace(SECRET, "bob@example.com")
    assert not all(c.ok for c in verify_bundle(tampered, signer.public))
    assert not _stdlib_ok(tampered, signer, tmp_path, "tampered")
    relabelled = {**after, "format": "converge.bundle/2"}
    assert not all(c.ok for c in verify_bundle(relabelled, signer.public))


def test_a_changed_fact_of_format_2_fails_verify(store: SqlRunStore) -> None:
    run_id = _engine(store).run(INITIAL).run_id
    fact = json.dumps(_fact_id(store, run_id, "answer"))
    with store.transaction() as conn:
        conn.execute(
            update(audit_events)
            .where(audit_events.c.run_id == run_id, audit_events.c.fact_id == fact)
            .values(payload=func.replace(audit_events.c.payload, '"yes"', '"no"'))
        )
    report = store.verify(run_id)
    assert not report.ok and report.reason == "payload changed"
