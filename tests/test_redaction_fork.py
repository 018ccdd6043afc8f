"""Forks of a run of chain format 2 (issue 56): a fork refers to its parent's facts
with their salts (or, redacted, their commitments), is itself of format 2, and
verifies; a fact redacted in the parent, before or after the fork, is redacted in
the fork, never its content. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import select

from audit import SqlRunStore, redact_fact
from audit.proofs import export_run, verify_bundle
from audit.redaction import redaction_note
from audit.settings import CHAIN_FORMAT, set_setting
from audit.signing import Signer
from audit.tables import runs
from engine.errors import FactNotFound
from engine.hitl import GateDecision
from tests.hitlfixtures import STORES, opened_store
from tests.redactionfixtures import REASON
from tests.test_redaction import INITIAL, SECRET, _all_text, _engine


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqlRunStore]:
    for s in opened_store(request.param, tmp_path):
        set_setting(s, CHAIN_FORMAT, "2")
        yield s


def _ids(store: SqlRunStore, run_id: str) -> dict[str, str]:
    return {f.key: f.id for f in store.facts(run_id)}


def _chain(store: SqlRunStore, run_id: str) -> str:
    with store.transaction(write=False) as conn:
        return str(conn.execute(select(runs.c.chain).where(runs.c.run_id == run_id)).scalar())


def _ok(store: SqlRunStore, *run_ids: str) -> None:
    for run_id in run_ids:
        report = store.verify(run_id)
        assert report.ok, report
    assert all(r.ok for r in store.verify_all()), store.verify_all()


def _redact(store: SqlRunStore, run_id: str, *keys: str) -> None:
    ids = _ids(store, run_id)
    for key in keys:
        redact_fact(store, run_id, ids[key], by="alice", reason=REASON)


def _redacted(store: SqlRunStore, run_id: str, key: str) -> bool:
    (fact,) = [f for f in store.facts(run_id) if f.key == key]
    note = redaction_note(fact.content)
    return note is not None and note.startswith("redacted by alice at ")


def test_a_fork_of_a_format_2_run_is_of_format_2_and_verifies(store: SqlRunStore) -> None:
    parent = _engine(store).run(INITIAL).run_id
    fork = _engine(store).fork(parent, 1)
    assert fork.run_id != parent and not fork.stop_reason.is_hitl_pending()
    assert _chain(store, fork.run_id) == _chain(store, parent) == "sha256/2"
    _ok(store, parent, fork.run_id)
    facts = {f.key: f.content for f in store.facts(fork.run_id)}
    assert facts["email"] == SECRET and facts["tally"] == 1
    signer = Signer(Ed25519PrivateKey.generate())
    checks = verify_bundle(export_run(store, signer, fork.run_id), signer.public)
    assert all(c.ok for c in checks), checks
    # forked at its last cycle, nothing new: the same facts, salts and facts root
    whole = _engine(store).fork(parent, 2).run_id
    _ok(store, whole)
    assert store.run(whole).facts_root == store.run(parent).facts_root
    assert store.run(whole).facts_count == store.run(parent).facts_count


def test_a_fact_redacted_in_the_parent_after_the_fork_is_redacted_in_the_fork(
    store: SqlRunStore,
) -> None:
    parent = _engine(store).run(INITIAL).run_id
    fork = _engine(store).fork(parent, 1).run_id
    queued = _engine(store).record_fork(parent, 1)
    paused = _engine(store, gated=True).fork(parent, 1)  # at its gate, checkpointed
    assert paused.stop_reason.is_hitl_pending()
    _redact(store, parent, "email", "contact")
    _ok(store, parent, fork, queued, paused.run_id)
    for run_id in (parent, fork, queued, paused.run_id):
        assert _redacted(store, run_id, "email") and _redacted(store, run_id, "contact")
    assert SECRET not in _all_text(store)
    resumed = _engine(store).resume_run(queued)
    assert not resumed.stop_reason.is_hitl_pending()
    (gate,) = [g for g in store.gates(pending=True) if g.run_id == paused.run_id]
    decided = _engine(store, gated=True).resume(gate.gate_id, GateDecision.approve(by="bob"))
    assert not decided.stop_reason.is_hitl_pending()
    _ok(store, queued, paused.run_id)
    assert _redacted(store, paused.run_id, "email")
    assert SECRET not in _all_text(store)


def test_a_fork_of_a_redacted_run_keeps_the_facts_redacted(
    store: SqlRunStore, tmp_path: Path
) -> None:
    parent = _engine(store, gated=True).run(INITIAL).run_id  # paused at its gate
    _redact(store, parent, "email", "contact")
    fork = _engine(store).fork(parent, 1).run_id
    _ok(store, parent, fork)
    assert _redacted(store, fork, "email") and _redacted(store, fork, "contact")
    assert {f.key: f.content for f in store.facts(fork)}["tally"] == 1
    assert SECRET not in _all_text(store)
    again = _engine(store).fork(fork, 2).run_id  # a fork of the fork
    _ok(store, again)
    assert _redacted(store, again, "email")
    signer = Signer(Ed25519PrivateKey.generate())
    bundle = export_run(store, signer, fork)
    assert SECRET not in json.dumps(bundle)
    checks = verify_bundle(bundle, signer.public)
    assert all(c.ok for c in checks), checks


def test_a_fact_a_fork_took_from_its_parent_is_redacted_in_the_parent(
    store: SqlRunStore,
) -> None:
    parent = _engine(store).run(INITIAL).run_id
    fork = _engine(store).fork(parent, 1).run_id
    email = _ids(store, fork)["email"]
    with pytest.raises(FactNotFound, match=f"redact it in run {parent}"):
        redact_fact(store, fork, email, by="alice", reason=REASON)
    _redact(store, fork, "tally")  # its own fact
    _ok(store, parent, fork)
    assert _redacted(store, fork, "tally") and not _redacted(store, parent, "tally")
