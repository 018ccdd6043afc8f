"""A fork refers to its parent's facts instead of copying them (issue 46, F1).

On SQLite and PostgreSQL: the fork's ``run_started`` holds no fact (its size does
not grow with the parent's), its ``forked_from`` carries the facts frontier (count
and Merkle frontier, whose root is ``facts_root``); its own fact chunks start after
the inherited facts. A fork of a fork, a resume and a diff of a fork reach what an
uninterrupted run reaches. A parent changed after the fork makes loading the
fork fail; a parent deleted leaves the fork verifying alone (with a note), its
facts unreadable (``ParentMissing``), and its proof bundle, exported before,
verifying standalone with ``converge verify-bundle`` and the stdlib verifier,
which both refuse a copy whose inherited facts were changed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import delete, select, update

from audit.store import SqlRunStore
from audit.tables import audit_events, checkpoints, fact_chunks, runs
from benchmarks.fork_bench import wide_engine
from converge.timetravel import diff_runs, snapshot
from engine import Budget
from engine.errors import ExportError, ParentMissing, ResumeError, UnverifiedParent
from engine.facts import canonical_json
from engine.hashing.merkle import MerkleFrontier
from tests.proofsfixtures import (
    Keys,
    failed,
    make_keys,
    signing,
    store_at,
    verify_cli,
    verify_independent,
    write,
)

BACKENDS = ["sqlite", "pg"]


def _cycles(n: int) -> Budget:
    return Budget(max_cycles=n, max_facts=0)


def _started_text(store: SqlRunStore, run_id: str) -> str:
    with store.transaction(write=False) as conn:
        return str(
            conn.execute(
                select(audit_events.c.payload).where(
                    audit_events.c.run_id == run_id, audit_events.c.seq == 1
                )
            ).scalar_one()
        )


def _agree(bundle: Path, keys: Keys) -> tuple[int, dict[str, Any]]:
    code, result = verify_cli(bundle, keys)
    other_code, other = verify_independent(bundle, keys)
    assert other_code == code, (other, result)
    assert other == [(c["name"], c["ok"]) for c in result["checks"]]
    return code, result


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqlRunStore]:
    """A fresh store of each backend, closed (and its schema dropped) after the test."""
    with store_at(request.param, tmp_path) as (_url, opened):
        yield opened


def test_the_forks_run_started_refers_to_the_parents_facts_in_o1(
    store: SqlRunStore,
) -> None:
    sizes = {}
    for per_cycle in (2, 200):
        parent = wide_engine(store, per_cycle, 6).run({"step": [0]})
        fork = wide_engine(store, per_cycle, 6).fork(parent.run_id, 4)
        text = _started_text(store, fork.run_id)
        started = json.loads(text)
        assert "initial_facts" not in started
        link = started["forked_from"]
        taken = [f for f in parent.context if f.provenance.cycle <= 4]
        assert link["facts"]["count"] == len(taken) == 4 * per_cycle + 5
        assert MerkleFrontier.from_json(link["facts"]["frontier"]).root() == link["facts_root"]
        sizes[per_cycle] = len(text)
        # the fork's own facts are numbered after the ones it refers to
        assert list(fork.context) == list(parent.context)  # the same cycles again
        assert store.run(fork.run_id).facts_count == len(parent.context)
        with store.transaction(write=False) as conn:
            firsts = conn.execute(
                select(fact_chunks.c.first).where(fact_chunks.c.run_id == fork.run_id)
            ).scalars()
            assert min(firsts) == len(taken)
        assert store.verify(fork.run_id).ok
        assert store.facts(fork.run_id) == list(parent.context)
    # 100 times the facts: the same event but for a few more frontier hashes
    assert sizes[200] < sizes[2] + 1_000, sizes


def test_a_fork_of_a_fork_resumes_and_diffs_as_an_uninterrupted_run(
    store: SqlRunStore,
) -> None:
    whole = wide_engine(store, 3, 9).run({"step": [0]})
    parent = wide_engine(store, 3, 4).run({"step": [0]})
    fork = wide_engine(store, 3, 6).fork(parent.run_id, 2)  # stops by its budget at 6
    again = wide_engine(store, 3, 9).resume_run(fork.run_id, budget=_cycles(9))  # a fork's resume
    assert list(again.context) == list(whole.context)
    after = wide_engine(store, 3, 9).fork(fork.run_id, 5)  # after the fork's fork point
    before = wide_engine(store, 3, 9).fork(fork.run_id, 1)  # before it: the parent's cycles
    for result in (after, before):
        assert list(result.context) == list(whole.context)
        assert store.verify(result.run_id).ok
        assert store.facts(result.run_id) == list(whole.context)
    link = store.events(after.run_id)[0].payload["forked_from"]
    assert (link["run"], link["facts"]["count"]) == (fork.run_id, 5 * 4 + 1)
    diff = diff_runs(snapshot(store, whole.run_id), snapshot(store, after.run_id))
    assert not diff.changed and not diff.only_a and not diff.only_b


def _forge_first_item(store: SqlRunStore, run_id: str) -> int:
    """Change the content of the run's first ``item`` fact (hash left as it was)."""
    with store.transaction() as conn:
        seq, payload = conn.execute(
            select(audit_events.c.seq, audit_events.c.payload)
            .where(audit_events.c.run_id == run_id, audit_events.c.kind == "fact_promoted")
            .order_by(audit_events.c.seq)
        ).first()  # type: ignore[misc]
        fact = json.loads(payload)
        fact["content"] = -1
        conn.execute(
            update(audit_events)
            .where(audit_events.c.run_id == run_id, audit_events.c.seq == seq)
            .values(payload=canonical_json(fact))
        )
    return int(seq)


def test_a_parent_changed_after_the_fork_stops_every_load_of_the_fork(
    store: SqlRunStore,
) -> None:
    parent = wide_engine(store, 2, 4).run({"step": [0]})
    fork = wide_engine(store, 2, 6).fork(parent.run_id, 3)
    seq = _forge_first_item(store, parent.run_id)
    report = store.verify(fork.run_id)
    assert not report.ok and f"parent run {parent.run_id} changed since the fork" in str(report)
    for load in (
        lambda: store.facts(fork.run_id),
        lambda: wide_engine(store, 2, 9).resume_run(fork.run_id, budget=_cycles(9)),
        lambda: wide_engine(store, 2, 9).fork(fork.run_id, 5),
    ):
        with pytest.raises(UnverifiedParent, match=f"seq {seq}: payload changed"):
            load()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_fork_whose_parent_is_deleted_verifies_alone_and_its_bundle_standalone(
    backend: str, tmp_path: Path
) -> None:
    from audit.proofs import export_run

    keys = make_keys(tmp_path / "keys")
    with store_at(backend, tmp_path) as (_url, store):
        signing(store, keys)
        parent = wide_engine(store, 2, 4).run({"step": [0]})
        fork = wide_engine(store, 2, 6).fork(parent.run_id, 3)
        assert store.signer is not None
        bundle = export_run(store, store.signer, fork.run_id)
        with store.transaction() as conn:
            for table in (audit_events, checkpoints, fact_chunks, runs):
                conn.execute(delete(table).where(table.c.run_id == parent.run_id))
        report = store.verify(fork.run_id)
        assert report.ok, report
        assert f"parent run {parent.run_id} is not in the store" in str(report.reason)
        with pytest.raises(ParentMissing, match=f"fork of run {parent.run_id}") as gone:
            store.facts(fork.run_id)
        assert isinstance(gone.value, ResumeError) and gone.value.parent == parent.run_id
        with pytest.raises(ParentMissing):
            wide_engine(store, 2, 9).resume_run(fork.run_id, budget=_cycles(9))
        with pytest.raises(ExportError, match="not in the store"):
            export_run(store, store.signer, fork.run_id)
    # the bundle exported before carries the facts the fork took: it needs no store
    assert len(bundle["initial_facts"]) == 3 * 3 + 1
    code, out = _agree(write(tmp_path / "fork.json", bundle), keys)
    assert code == 0, failed(out)
    changed = json.loads(bundle["initial_facts"][1])
    changed["content"] = 999
    bundle["initial_facts"][1] = canonical_json(changed)
    code, out = _agree(write(tmp_path / "fork-bad.json", bundle), keys)
    assert code == 1 and set(failed(out)) == {"facts", "facts root"}
    assert "differ from those it forked from" in failed(out)["facts"]
