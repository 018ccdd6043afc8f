"""A fork or a replay does not launder a tampered parent (issue 40, item 1), and a fork
can be recorded for a worker without being run.

On SQLite and PostgreSQL: a fact's content edited in the parent's stored events
(2 -> 999, as with ``sqlite3``) makes ``Engine.fork`` / ``fork_run`` /
``record_fork`` / ``converge fork`` / ``POST /api/runs/{id}/fork`` refuse the
parent, naming the edited seq, and record nothing; ``converge replay`` refuses
it too. A fork's ``forked_from`` carries the parent's verified head: a parent
edited (or re-chained) after the fork fails the fork's verify, naming the parent
and the seq, and ``converge diff`` says which run does not verify; a deleted
parent leaves the fork verifying on its own chain, with a note. A fork recorded
with ``record_fork`` is ``queued`` and verifies; ``execute_run`` drives it to the
stop and facts ``fork_run`` reaches.
"""

from __future__ import annotations

import gc
import json
from pathlib import Path

import httpx
import pytest
from sqlalchemy import delete, func, select, update
from typer.testing import CliRunner

from audit import open_store
from audit.people import add_token
from audit.people._people import actors_of
from audit.run_queue import runs_to_recover
from audit.store import SqlRunStore
from audit.tables import audit_events, checkpoints, runs
from converge.cli import app
from converge.jobs import load_job
from converge.service import execute_run
from converge.timetravel import diff_runs, fork_run, record_fork, snapshot
from engine.errors import ParentMissing, UnverifiedParent
from engine.facts import canonical_json
from engine.status import RunStatus
from tests.keyfixtures import rechain
from tests.webfixtures import run_job, served

OSCILLATOR = Path(__file__).resolve().parent.parent / "examples" / "oscillator" / "job.yaml"


def _parent(store: SqlRunStore) -> str:
    """The oscillator job run to its cycle budget (10): ping 0, pong 1, ping 2, ..."""
    return run_job(load_job(OSCILLATOR), store).run_id


def _forge(store: SqlRunStore, run_id: str, content: int = 2, to: int = 999) -> int:
    """Edit the stored fact whose content is ``content`` to ``to`` (its hash left as
    it was, as an edit with sqlite3 does); the seq of the edited event."""
    with store.transaction() as conn:
        for seq, payload in conn.execute(
            select(audit_events.c.seq, audit_events.c.payload).where(
                audit_events.c.run_id == run_id, audit_events.c.kind == "fact_promoted"
            )
        ).all():
            fact = json.loads(payload)
            if fact["content"] == content:
                fact["content"] = to
                conn.execute(
                    update(audit_events)
                    .where(audit_events.c.run_id == run_id, audit_events.c.seq == seq)
                    .values(payload=canonical_json(fact))
                )
                return int(seq)
    raise AssertionError(f"no fact with content {content!r} in run {run_id}")


def _counts(store: SqlRunStore) -> tuple[int, int]:
    with store.transaction(write=False) as conn:
        return (
            conn.execute(select(func.count()).select_from(runs)).scalar_one(),
            conn.execute(select(func.count()).select_from(audit_events)).scalar_one(),
        )


def test_a_tampered_parent_is_refused_by_every_fork_naming_the_seq_and_nothing_is_recorded(
    store: SqlRunStore,
) -> None:
    parent = _parent(store)
    seq = _forge(store, parent)
    assert store.verify(parent).first_bad_seq == seq
    before = _counts(store)
    job = load_job(OSCILLATOR)
    attempts = (
        lambda: job.build_engine(store).fork(parent, 5),
        lambda: job.build_engine(store).record_fork(parent, 5),
        lambda: fork_run(store, parent, 5, by="mallory"),
        lambda: record_fork(store, parent, 5, by="mallory"),
    )
    for attempt in attempts:
        with pytest.raises(UnverifiedParent, match=f"seq {seq}: payload changed") as refused:
            attempt()
        assert (refused.value.run_id, refused.value.first_bad_seq) == (parent, seq)
    assert _counts(store) == before
    assert [r.run_id for r in store.runs()] == [parent]


def test_a_fork_before_the_tampered_event_is_taken_and_verifies(store: SqlRunStore) -> None:
    parent = _parent(store)
    _forge(store, parent, content=8)  # ping 8: promoted in cycle 8
    fork = fork_run(store, parent, 3, changes={"max_cycles": 6})
    assert store.verify(fork.run_id).ok
    assert 999 not in [f.content for f in fork.context]


def test_a_parent_changed_after_the_fork_fails_the_forks_verify_and_the_diff_says_so(
    store: SqlRunStore,
) -> None:
    parent = _parent(store)
    fork = fork_run(store, parent, 5, changes={"max_cycles": 12}).run_id
    assert store.verify(fork).ok and store.verify(parent).ok
    seq = _forge(store, parent)
    report = store.verify(fork)
    assert not report.ok and report.first_bad_seq == 1  # the fork's link, in its run_started
    assert f"parent run {parent} changed since the fork: seq {seq}: payload changed" in str(report)
    failed = {r.run_id for r in store.verify_all() if not r.ok}
    assert failed == {parent, fork}
    diff = diff_runs(snapshot(store, parent), snapshot(store, fork))
    assert diff.why[0].startswith(f"A does not verify (seq {seq}: payload changed)")
    # the fork refers to the parent's facts (issue 46): none to compare once it changed
    assert diff.b.facts == () and f"parent run {parent} changed" in str(diff.b.unverified)
    body = diff.to_dict()
    assert (body["a"]["verified"], body["b"]["verified"]) == (False, False)


def _fork_of_a_rechained_parent(store: SqlRunStore) -> tuple[str, str]:
    """A run forked at cycle 5, then the parent edited and its plain chain recomputed by
    the forger: (parent, fork)."""
    parent = _parent(store)
    fork = fork_run(store, parent, 5, changes={"max_cycles": 12}).run_id
    _forge(store, parent)
    rechain(store.url, parent, None)
    return parent, fork


def test_a_parent_rechained_after_the_fork_fails_the_forks_verify_on_its_head(
    store: SqlRunStore,
) -> None:
    parent, fork = _fork_of_a_rechained_parent(store)
    # its chain hashes again: only its stop's facts root, at its end, shows the edit
    assert store.verify(parent).first_bad_seq == store.run(parent).last_seq
    report = store.verify(fork)
    assert not report.ok
    assert report.reason is not None and "head mismatch" in report.reason
    assert parent in report.reason


def test_a_fork_of_a_fork_whose_parent_was_rechained_is_refused_naming_the_link(
    store: SqlRunStore,
) -> None:
    parent, fork = _fork_of_a_rechained_parent(store)
    with pytest.raises(UnverifiedParent, match=f"parent run {parent} changed since the fork"):
        fork_run(store, fork, 3)
    assert len(store.runs()) == 2


def test_a_parent_rechained_before_the_fork_is_refused_at_the_ledger_head_it_contradicts(
    store: SqlRunStore,
) -> None:
    parent = _parent(store)
    seq = _forge(store, parent)
    rechain(store.url, parent, None, ledger=False)  # the chain hashes again, the ledger not
    assert not store.verify(parent).ok
    before = _counts(store)
    with pytest.raises(UnverifiedParent, match="ledger head mismatch") as refused:
        fork_run(store, parent, 5)
    assert refused.value.first_bad_seq is not None and refused.value.first_bad_seq >= seq
    assert _counts(store) == before


def test_a_fork_whose_parent_was_deleted_verifies_on_its_own_chain_with_a_note(
    store: SqlRunStore,
) -> None:
    parent = _parent(store)
    fork = fork_run(store, parent, 5, changes={"max_cycles": 12}).run_id
    with store.transaction() as conn:
        for table in (audit_events, checkpoints, runs):
            conn.execute(delete(table).where(table.c.run_id == parent))
    report = store.verify(fork)
    assert report.ok, report
    assert report.reason is not None and f"parent run {parent} is not in the store" in report.reason
    # the fork refers to the parent's facts (issue 46): gone with it, a typed error
    with pytest.raises(ParentMissing, match=f"fork of run {parent}, which is not in the store"):
        store.facts(fork)


def test_a_recorded_fork_is_queued_and_a_worker_drives_it_to_the_stop_fork_run_reaches(
    store: SqlRunStore,
) -> None:
    parent = _parent(store)
    driven = fork_run(store, parent, 4, changes={"max_cycles": 12})
    frozen_before = gc.get_freeze_count()
    queued = record_fork(store, parent, 4, changes={"max_cycles": 12}, by="alice")
    # the state it loaded is not driven here: nothing of it stays frozen (a freeze left
    # behind turned the collector's bulk freeze off for every later run of the process)
    assert gc.get_freeze_count() == frozen_before
    row = store.run(queued)
    assert (row.status, row.parent_run_id, row.cycles) == (RunStatus.QUEUED, parent, 4)
    assert [e.kind for e in store.events(queued)] == ["run_started", "checkpoint_saved"]
    link = store.events(queued)[0].payload["forked_from"]
    assert link["cycle"] == 4 and link["parent_head"]["seq"] > 1
    assert store.verify(queued).ok
    assert "alice" in actors_of(store, queued)
    assert (queued, RunStatus.QUEUED) in runs_to_recover(store)  # a worker's sweep finds it
    result = execute_run(store, queued, "resume")
    assert result is not None and result.run_id == queued
    assert result.stop_reason == driven.stop_reason
    assert list(result.context) == list(driven.context)  # ids, contents, provenance
    assert store.run(queued).status == RunStatus.STOPPED
    assert store.verify(queued).ok
    assert execute_run(store, queued) is None  # stopped: a duplicate message does nothing


def test_converge_fork_and_replay_refuse_a_tampered_run_in_one_line(tmp_path: Path) -> None:
    db = str(tmp_path / "f.db")
    runner = CliRunner()
    ran = runner.invoke(app, ["run", str(OSCILLATOR), "--db", db, "--json"])
    parent = json.loads(ran.stdout)["run_id"]
    store = open_store(db)
    try:
        seq = _forge(store, parent)
    finally:
        store.close()
    forked = runner.invoke(app, ["fork", parent, "--at-cycle", "5", "--db", db])
    assert forked.exit_code == 2
    assert f"run {parent} does not verify: seq {seq}: payload changed" in forked.stderr
    assert len(forked.stderr.strip().splitlines()) == 1
    replayed = runner.invoke(app, ["replay", parent, "--db", db])
    assert replayed.exit_code == 2
    assert f"seq {seq}: payload changed; refusing to replay it" in replayed.stderr
    listed = runner.invoke(app, ["verify", "--all", "--db", db])
    assert listed.exit_code == 1  # no fork was recorded next to the tampered run


def test_the_fork_api_answers_409_naming_the_seq_of_a_tampered_parent(
    store: SqlRunStore,
) -> None:
    parent = _parent(store)
    seq = _forge(store, parent)
    alice = add_token(store, "alice", "approver")
    with served(store) as base:
        refused = httpx.post(
            f"{base}/api/runs/{parent}/fork",
            json={"cycle": 5},
            headers={"Authorization": f"Bearer {alice}"},
            timeout=60,
        )
    assert refused.status_code == 409, refused.text
    assert f"seq {seq}: payload changed" in refused.json()["detail"]
    assert [r.run_id for r in store.runs()] == [parent]
