"""Retention (issue 56, item 2): ``converge prune`` removes stopped runs and leaves a
tombstone the ledger commits to; what remains, the ledger, its signed heads and the
archived bundles still verify. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from sqlalchemy import func, select, update

from audit import SqlRunStore
from audit.ledger import consistency_proof, signed_head
from audit.proofs import read_bundle, verify_bundle
from audit.retention import prune
from audit.signing import Signer
from audit.tables import audit_events, checkpoints, fact_chunks, gates, pruned_runs, runs
from engine.errors import AuditKeyError, ParentMissing, PruneError, RunNotFound
from examples import verify_bundle as stdlib
from tests.faultfixtures import opened, run_cli
from tests.hitlfixtures import INITIAL, STORES, make_engine, opened_store, store_url_for

SOON = 10.0
"""Seconds after now: a cutoff every run of these tests stopped before."""


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqlRunStore]:
    yield from opened_store(request.param, tmp_path)


def _stopped(store: SqlRunStore) -> str:
    return make_engine(store, gated=False).run(INITIAL).run_id


def _paused(store: SqlRunStore) -> str:
    result = make_engine(store).run(INITIAL)
    assert result.stop_reason.is_hitl_pending()
    return result.run_id


def _count(store: SqlRunStore, table: Any, run_id: str) -> int:
    with store.transaction(write=False) as conn:
        return int(conn.execute(select(func.count()).where(table.c.run_id == run_id)).scalar_one())


def _reports(store: SqlRunStore) -> dict[str, Any]:
    return {r.run_id: r for r in store.verify_all()}


def test_prune_removes_stopped_runs_and_leaves_a_tombstone_that_verifies(
    store: SqlRunStore,
) -> None:
    old, kept_stopped, paused = _stopped(store), _stopped(store), _paused(store)
    before = {r.run_id: r for r in store.runs()}
    cutoff = (before[old].ended_at or 0) + 1e-6  # after old stopped, before the next
    assert (before[kept_stopped].ended_at or 0) >= cutoff
    report = prune(store, before=cutoff, by="alice", reason="retention: 90 days")
    assert [p.run_id for p in report.pruned] == [old]
    for table in (runs, audit_events, gates, checkpoints, fact_chunks):
        assert _count(store, table, old) == 0, table.name
    assert _count(store, audit_events, kept_stopped) > 0
    stone = report.pruned[0].tombstone
    assert stone is not None
    was = before[old]
    assert (stone.head_hash, stone.last_seq, stone.facts_count, stone.facts_root) == (
        was.head_hash,
        was.last_seq,
        was.facts_count,
        was.facts_root,
    )
    assert (stone.pruned_by, stone.reason, stone.job) == ("alice", "retention: 90 days", was.job)
    reports = _reports(store)
    assert all(r.ok for r in reports.values()), reports
    assert reports[old].reason is not None and reports[old].reason.startswith("pruned by alice at ")
    assert reports[old].reason.endswith(": retention: 90 days")
    assert {paused, kept_stopped} <= set(reports)
    for named in (old, old[:8]):
        with pytest.raises(RunNotFound, match=f"run '{named}' was pruned by alice at "):
            store.resolve_run_id(named)


def test_a_changed_tombstone_fails_verify(store: SqlRunStore) -> None:
    old = _stopped(store)
    prune(store, before=time.time() + SOON, by="alice", reason="retention")
    with store.transaction() as conn:
        conn.execute(update(pruned_runs).values(reason="nothing to see"))
    (bad,) = [r for r in store.verify_all() if not r.ok]
    assert bad.run_id == old and "tombstone changed" in (bad.reason or "")


def test_a_tombstone_removed_leaves_the_run_deleted(store: SqlRunStore) -> None:
    old = _stopped(store)
    prune(store, before=time.time() + SOON, by="alice", reason="retention")
    with store.transaction() as conn:
        conn.execute(pruned_runs.delete())
    (bad,) = [r for r in store.verify_all() if not r.ok]
    assert (bad.run_id, bad.reason) == (old, "run deleted (named by the ledger)")


def test_paused_queued_running_runs_and_parents_of_live_forks_are_never_pruned(
    store: SqlRunStore,
) -> None:
    paused = _paused(store)
    parent = _stopped(store)
    fork = make_engine(store, gated=False).record_fork(parent, 1)  # queued
    running = _stopped(store)
    with store.transaction() as conn:  # as if another process were running it
        conn.execute(update(runs).where(runs.c.run_id == running).values(status="running"))
    report = prune(store, before=time.time() + SOON, by="alice", reason="retention")
    assert report.pruned == []
    assert report.kept == {parent: f"its fork {fork} is queued: it still reads its parent's facts"}
    assert {paused, parent, fork, running} <= {r.run_id for r in store.runs()}


def test_a_dry_run_writes_nothing(store: SqlRunStore) -> None:
    old = _stopped(store)
    report = prune(store, before=time.time() + SOON, by="alice", reason="x", dry_run=True)
    assert [p.run_id for p in report.pruned] == [old] and report.dry_run
    assert _count(store, audit_events, old) > 0
    assert all(r.ok and not (r.reason or "").startswith("pruned") for r in store.verify_all())
    assert not store.has_table(pruned_runs.name) or _count(store, pruned_runs, old) == 0


def test_a_fork_of_a_pruned_run_says_its_parent_was_pruned(store: SqlRunStore) -> None:
    parent = _stopped(store)
    fork = make_engine(store, gated=False).fork(parent, 1).run_id
    cutoff = (store.run(parent).ended_at or 0) + 1e-6
    assert [p.run_id for p in prune(store, before=cutoff, by="bob", reason="r").pruned] == [parent]
    with pytest.raises(ParentMissing, match=f"run {parent}, which was pruned by bob at "):
        store.facts(fork)
    report = store.verify(fork)
    assert report.ok and f"parent run {parent} was pruned by bob at " in (report.reason or "")


def test_an_archived_bundle_verifies_offline_against_a_head_signed_after_the_prune(
    store: SqlRunStore, tmp_path: Path
) -> None:
    signer = Signer(Ed25519PrivateKey.generate())
    old, other = _stopped(store), _stopped(store)
    cutoff = (store.run(old).ended_at or 0) + 1e-6
    archive = tmp_path / "archive"
    report = prune(store, before=cutoff, by="alice", reason="r", archive=archive, signer=signer)
    (pruned,) = report.pruned
    assert pruned.archived is not None and pruned.archived.startswith(f"{old}.json sha256:")
    bundle_path = archive / f"{old}.json"
    bundle = read_bundle(bundle_path)
    assert all(c.ok for c in verify_bundle(bundle, signer.public)), verify_bundle(
        bundle, signer.public
    )
    public_pem = tmp_path / "key.pub"
    public_pem.write_bytes(
        signer.public.public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    )
    assert stdlib.main([str(bundle_path), str(public_pem)]) == 0
    # more is recorded, a head is signed after the prune: the bundle's head is a prefix
    _stopped(store)
    later = signed_head(store, signer)
    first = bundle["signed_head"]
    assert later["size"] > first["size"]
    proof = consistency_proof(store, first["size"], later["size"])
    assert stdlib.verify_consistency(
        first["size"],
        later["size"],
        proof,
        bytes.fromhex(first["root"]),
        bytes.fromhex(later["root"]),
    )
    assert all(r.ok for r in store.verify_all())
    assert other in {r.run_id for r in store.runs()}


def test_archiving_needs_a_signing_key(store: SqlRunStore, tmp_path: Path) -> None:
    _stopped(store)
    with pytest.raises(PruneError, match="signing key"):
        prune(store, before=time.time() + SOON, by="a", reason="r", archive=tmp_path / "a")


@pytest.mark.parametrize("kind", STORES)
def test_the_prune_command_uses_the_stores_retention_and_verify_says_pruned(
    kind: str, tmp_path: Path
) -> None:
    with store_url_for(kind, tmp_path) as url:
        with opened(url) as s:
            old, paused = _stopped(s), _paused(s)
            with s.transaction() as conn:  # it stopped two days ago
                conn.execute(
                    update(runs)
                    .where(runs.c.run_id == old)
                    .values(ended_at=runs.c.ended_at - 2 * 86400)
                )
        refused = run_cli(["prune", "--db", url])
        assert refused.returncode == 2 and "converge config set retention-days N" in refused.stderr
        assert run_cli(["prune", "--before", "yesterday", "--db", url]).returncode == 2
        assert run_cli(["config", "set", "retention-days", "1", "--db", url]).returncode == 0
        dry = run_cli(["prune", "--dry-run", "--json", "--db", url])
        assert [p["run_id"] for p in json.loads(dry.stdout)["pruned"]] == [old], dry.stderr
        done = run_cli(["prune", "--by", "carol", "--reason", "GDPR art. 17", "--db", url])
        assert done.returncode == 0 and f"pruned {old}" in done.stdout, done.stderr
        verified = run_cli(["verify", "--all", "--db", url])
        assert verified.returncode == 0, verified.stdout + verified.stderr
        assert f"ok {old}: pruned by carol at " in verified.stdout
        assert "GDPR art. 17" in verified.stdout
        shown = run_cli(["show", old, "--db", url])
        assert shown.returncode == 2 and "was pruned by carol" in shown.stderr
        assert paused in run_cli(["runs", "--db", url]).stdout


@pytest.mark.parametrize("kind", STORES)
def test_a_keyed_store_is_pruned_only_with_its_key(kind: str, tmp_path: Path) -> None:
    with store_url_for(kind, tmp_path) as url:
        with opened(url, key="k" * 32) as keyed:
            old = _stopped(keyed)
        with opened(url, key=None) as keyless:
            with pytest.raises(AuditKeyError, match="pruning runs"):
                prune(keyless, before=time.time() + SOON, by="eve", reason="r")
            assert _count(keyless, audit_events, old) > 0
        with opened(url, key="k" * 32) as keyed:
            assert [
                p.run_id for p in prune(keyed, before=time.time() + SOON, by="a", reason="r").pruned
            ] == [old]
            assert all(r.ok for r in keyed.verify_all())
