"""Leases of running runs in the store (audit.writing._lease, docs/scale-out.md).

A running run is held while its lease is unexpired by the database's clock: a
holder on another host is judged by its lease alone (before leases it was always
"alive"), and a run whose lease expired is ``crashed``, claimed by another
process with a new fencing epoch; the old holder's writes are then refused and
its keeper gives the lease up at its next renewal. Expiry is driven through the
database (``expires_at`` set in the past with SQL), never by sleeping.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select, text, update

from audit import SqlRunStore, open_store
from audit.run_queue import queue_run, runs_to_recover, take_queued
from audit.tables import run_leases
from audit.url import idle_tx_ms
from audit.writing._lease import LOST, grant, lease_seconds, read_lease
from audit.writing._liveness import holder_alive, holder_id
from converge.service import ExpiredLeases
from engine.errors import RunBusy, RunSuperseded, StoreError
from engine.status import RunStatus
from engine.store import AuditEvent, RunHeader
from tests.ledgerfixtures import T0, run, url

__all__ = ["url"]  # fixture, used by name

ELSEWHERE = "host-b/4242/777"
"""A holder id on another host: alive as far as this host can tell."""


@pytest.fixture
def store(url: str) -> Iterator[SqlRunStore]:
    opened = open_store(url)
    yield opened
    opened.close()


def _start(store: SqlRunStore, run_id: str = "r1") -> None:
    store.start_run(RunHeader(run_id, None, None, ("a",), T0), [])
    store.append_events(run_id, [AuditEvent("cycle_started", 1, {}, T0 + 1)])


def _set_lease(store: SqlRunStore, run_id: str, **values: object) -> None:
    with store.transaction() as conn:
        conn.execute(update(run_leases).where(run_leases.c.run_id == run_id).values(**values))


def _expire(store: SqlRunStore, run_id: str) -> None:
    """The lease expired by the database's clock (ten seconds ago)."""
    now = "extract(epoch from clock_timestamp())" if store.is_postgres else "unixepoch()"
    with store.transaction() as conn:
        conn.execute(
            text(f"UPDATE run_leases SET expires_at = {now} - 10 WHERE run_id = :r"), {"r": run_id}
        )


def test_a_started_run_holds_a_lease_by_the_database_clock(store: SqlRunStore) -> None:
    _start(store)
    row = store.run("r1")
    assert row.status == RunStatus.RUNNING
    assert row.lease_holder == holder_id()
    assert row.lease_left_s is not None and 0 < row.lease_left_s <= lease_seconds()
    assert store.leases.held() == {"r1": 0}
    assert row.to_dict()["lease_holder"] == holder_id()


def test_renewal_moves_the_expiry_on_and_the_stop_drops_the_lease(store: SqlRunStore) -> None:
    _start(store)
    _expire(store, "r1")
    assert store.run("r1").status == RunStatus.CRASHED
    assert store.leases.renew() == []  # nobody claimed it: still ours, renewed
    assert store.run("r1").status == RunStatus.RUNNING


def test_a_run_that_stops_gives_its_lease_up(store: SqlRunStore) -> None:
    run(store, "done", cycles=3)
    assert store.run("done").status == RunStatus.STOPPED
    assert store.run("done").lease_holder is None
    assert store.leases.held() == {}
    with store.transaction() as conn:
        assert read_lease(conn, "done") is None


def test_a_holder_on_another_host_is_judged_by_its_lease(store: SqlRunStore) -> None:
    _start(store)
    _set_lease(store, "r1", holder=ELSEWHERE)
    store.leases.drop("r1")  # this process no longer renews it
    assert store.run("r1").status == RunStatus.RUNNING
    assert runs_to_recover(store, queued=False) == []
    _expire(store, "r1")
    assert store.run("r1").status == RunStatus.CRASHED
    assert runs_to_recover(store, queued=False) == [("r1", RunStatus.CRASHED)]
    assert store.run("r1").lease_left_s is not None and store.run("r1").lease_left_s < 0


def test_without_a_lease_a_writer_on_another_host_is_taken_as_alive(store: SqlRunStore) -> None:
    """A run written by a converge before leases: judged by its pid, as then."""
    _start(store)
    store.leases.drop("r1")
    with store.transaction() as conn:
        conn.execute(run_leases.delete())
        conn.execute(text("UPDATE runs SET hostname = 'host-b', pid = 1"))
    assert store.run("r1").status == RunStatus.RUNNING
    assert store.run("r1").lease_holder is None


def test_an_expired_lease_is_claimed_and_the_old_holder_is_fenced(url: str) -> None:
    a, b = open_store(url), open_store(url)
    try:
        _start(a)
        seq = a.run("r1").last_seq
        _set_lease(a, "r1", holder=ELSEWHERE)  # as if host B held it...
        with pytest.raises(RunBusy):
            b.claim_resume("r1")  # ...and its lease still runs
        _set_lease(a, "r1", holder=holder_id())
        _expire(a, "r1")
        claim = b.claim_resume("r1")
        assert (claim.epoch, claim.was) == (1, RunStatus.CRASHED)
        with pytest.raises(RunSuperseded):
            a.append_events("r1", [AuditEvent("cycle_started", 2, {}, T0 + 2)])
        assert a.leases.renew() == ["r1"]  # the keeper finds it taken: gives it up
        assert a.claim_epochs["r1"] == LOST and a.leases.held() == {}
        with pytest.raises(RunSuperseded, match="lost its lease"):
            a.append_events("r1", [AuditEvent("cycle_started", 2, {}, T0 + 2)])
        b.append_events("r1", [AuditEvent("cycle_started", 2, {}, T0 + 2)])
        assert b.run("r1").last_seq == seq + 1 and b.run("r1").status == RunStatus.RUNNING
        with b.transaction() as conn:
            lease = read_lease(conn, "r1")
        assert lease is not None and lease.epoch == 1 and lease.held
    finally:
        a.close()
        b.close()


def test_a_claim_loses_to_a_renewal_between_its_read_and_its_write(store: SqlRunStore) -> None:
    _start(store)
    _expire(store, "r1")
    with store.transaction() as conn:
        seen = read_lease(conn, "r1")
    assert seen is not None and not seen.held
    assert store.leases.renew() == []  # the holder renews first
    with pytest.raises(RunBusy, match="renewed"), store.transaction() as conn:
        grant(conn, "r1", 1, store.leases.seconds, seen)
    with store.transaction() as conn:
        assert conn.execute(select(run_leases.c.epoch)).scalar() == 0


def test_a_released_claim_leaves_the_lease_expired(url: str) -> None:
    a, b = open_store(url), open_store(url)
    try:
        _start(a)
        a.leases.drop("r1")
        _expire(a, "r1")
        claim = b.claim_resume("r1")
        b.release_claim(claim)
        assert b.run("r1").status == RunStatus.CRASHED  # claimable again at once
        assert b.leases.held() == {}
        assert b.claim_resume("r1").epoch == 1
    finally:
        a.close()
        b.close()


def test_an_orphaned_take_is_taken_again_once_its_lease_expired(store: SqlRunStore) -> None:
    queue_run(store, RunHeader("q1", None, None, (), T0))
    take_queued(store, "q1")
    assert store.leases.held() == {"q1": 0}
    _set_lease(store, "q1", holder=ELSEWHERE)
    store.leases.drop("q1")
    with pytest.raises(RunBusy):
        take_queued(store, "q1")
    _expire(store, "q1")
    take_queued(store, "q1")
    assert store.run("q1").lease_holder == holder_id()


class _Queue:
    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    def send(self, run_id: str, action: str = "run") -> None:
        self.sent.append((run_id, action))


def test_expired_leases_are_sent_again_once_then_after_the_resend_delay(
    store: SqlRunStore,
) -> None:
    queue_run(store, RunHeader("waiting", None, None, (), T0))  # queued: not this sweep's
    _start(store)
    store.leases.drop("r1")
    _set_lease(store, "r1", holder=ELSEWHERE)
    now = [100.0]
    runs = _Queue()
    sweep = ExpiredLeases(store, runs, resend_s=60.0, clock=lambda: now[0])  # type: ignore[arg-type]
    assert sweep.tick() == []
    _expire(store, "r1")
    assert sweep.tick() == ["r1"]
    now[0] += 59.0
    assert sweep.tick() == []
    now[0] += 2.0
    assert sweep.tick() == ["r1"]
    assert runs.sent == [("r1", "run"), ("r1", "run")]


def test_a_holder_of_this_host_is_dead_when_its_pid_or_start_time_is_not_its_own() -> None:
    host, pid, start = holder_id().split("/")
    assert holder_alive(holder_id())
    assert holder_alive(f"elsewhere/{pid}/{start}")
    if start != "0":
        assert not holder_alive(f"{host}/{pid}/{int(start) + 1}")  # a pid reused
    assert not holder_alive(f"{host}/999999999/1")


def test_the_lease_length_comes_from_the_environment() -> None:
    assert lease_seconds({}) == 30.0
    assert lease_seconds({"CONVERGE_LEASE_S": "2.5"}) == 2.5
    for bad in ("0", "-1", "soon", "nan", "inf"):
        with pytest.raises(StoreError, match="CONVERGE_LEASE_S"):
            lease_seconds({"CONVERGE_LEASE_S": bad})
    assert idle_tx_ms({}) == 60_000
    assert idle_tx_ms({"CONVERGE_LEASE_S": "2"}) == 10_000  # the floor
    assert idle_tx_ms({"CONVERGE_LEASE_S": "soon"}) == 60_000


def test_a_store_of_version_6_gains_the_lease_table(tmp_path: Path) -> None:
    db = str(tmp_path / "old.db")
    open_store(db).close()
    old = open_store(db)
    with old.transaction() as conn:
        conn.execute(text("DROP TABLE run_leases"))
        conn.execute(text("UPDATE converge_meta SET value = '6' WHERE key = 'schema_version'"))
    old.close()
    store = open_store(db)
    try:
        _start(store)
        assert store.run("r1").lease_holder == holder_id()
        with store.transaction() as conn:
            version = conn.execute(
                text("SELECT value FROM converge_meta WHERE key = 'schema_version'")
            ).scalar()
        assert version == "7"
    finally:
        store.close()


def test_converge_runs_shows_the_holder_and_the_lease_left(tmp_path: Path) -> None:
    import json

    from typer.testing import CliRunner

    from converge.cli import app

    db = str(tmp_path / "runs.db")
    store = open_store(db)
    try:
        _start(store, "held")
        _start(store, "lost")
        store.leases.close()
        _set_lease(store, "lost", holder=ELSEWHERE)
        _expire(store, "lost")
    finally:
        store.close()
    listed = CliRunner().invoke(app, ["runs", "--db", db, "--json"])
    assert listed.exit_code == 0, listed.output
    rows = {r["run_id"]: r for r in json.loads(listed.output)}
    assert rows["held"]["status"] == "running" and rows["held"]["lease_holder"] == holder_id()
    assert rows["held"]["lease_left_s"] > 0
    assert rows["lost"]["status"] == "crashed" and rows["lost"]["lease_holder"] == ELSEWHERE
    assert rows["lost"]["lease_left_s"] < 0
    table = CliRunner().invoke(app, ["runs", "--db", db], env={"COLUMNS": "160"})
    assert "holder, lease" in table.output and "expired" in table.output, table.output


def test_converge_worker_lease_seconds_reaches_the_worker_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--lease-seconds`` is put in the environment the worker's processes open
    their stores with (here ``--run`` of a run that does not exist: exit 2)."""
    from typer.testing import CliRunner

    from converge.cli import app

    db = str(tmp_path / "w.db")
    open_store(db).close()
    monkeypatch.setenv("CONVERGE_LEASE_S", "30")  # restored (or removed) after the test
    monkeypatch.delenv("CONVERGE_LEASE_S")
    done = CliRunner().invoke(app, ["worker", "--db", db, "--run", "nope", "--lease-seconds", "7"])
    assert done.exit_code != 0
    assert os.environ["CONVERGE_LEASE_S"] == "7.0"
    assert lease_seconds() == 7.0
