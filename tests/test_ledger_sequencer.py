"""The ledger's sequencer (issue 31): a commit records its run's head without locking the
store-wide ledger; sequencer passes integrate the pending heads in batches.

Concurrent runs on PostgreSQL end up in the ledger in order, nothing lost or
twice; ``verify`` names a head committed and not yet integrated, and fails once it
waited past the bound (an injected clock, no sleeping); one process leads the
passes and another takes over; a run cut short or deleted after integration is
still named; ``converge anchor`` covers what it integrated; each signed batch head
is the RFC 6962 root of the ledger. Sequencers and writers killed -9:
tests/test_ledger_sequencer_kills.py. On PostgreSQL (required under CI) and SQLite
(inline by default, pending with a delay).
"""

from __future__ import annotations

import gc
import threading
import weakref
from pathlib import Path

import pytest
from sqlalchemy import text
from typer.testing import CliRunner

from audit import SqlRunStore, open_store
from audit.ledger import (
    NOT_YET_INTEGRATED,
    LedgerSequencer,
    check_consistency,
    integrate,
    ledger_entries,
    ledger_tree,
    pending_count,
)
from audit.signing._statements import check_signature, generate_keys, load_signer, stored_statements
from audit.tables import SCHEMA_VERSION
from audit.writing import LEDGER_DELAY_ENV, ledger_timing
from converge.cli import app
from engine.errors import ConfigurationError
from engine.store import AuditEvent, RunHeader
from tests.ledgerfixtures import (
    T0,
    Clock,
    assert_ledger_in_order,
    chain_hash,
    crash,
    delayed,
    ledger_rows,
    no_end_pass,
    pg_url,
    recorded_heads,
    run,
    url,
)

__all__ = ["pg_url", "recorded_heads", "url"]  # fixtures, used by name

runner = CliRunner()


def test_concurrent_runs_on_postgresql_are_integrated_in_order_nothing_lost_or_twice(
    pg_url: str, recorded_heads: list[tuple[str, int, str]]
) -> None:
    serving = open_store(pg_url)
    sequencer = LedgerSequencer(serving, every_s=0.002).start()
    failures: list[BaseException] = []

    def one_run(i: int) -> None:
        store = open_store(pg_url)  # a store (an engine, a pool) of its own per run
        try:
            assert not store.ledger_timing.inline
            run(store, f"run-{i}", cycles=30)
        except BaseException as exc:
            failures.append(exc)
        finally:
            store.close()

    threads = [threading.Thread(target=one_run, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    sequencer.stop()
    assert not failures, failures
    assert len(recorded_heads) >= 6 * 30
    assert_ledger_in_order(serving, recorded_heads)
    serving.close()


def test_sqlite_integrates_each_commit_inline_by_default(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "inline.db"))
    assert store.ledger_timing.inline
    store.start_run(RunHeader("inline", None, None, ("a",), T0), [])
    for cycle in range(1, 4):
        store.append_events("inline", [AuditEvent("cycle_started", cycle, {}, T0 + cycle)])
        assert pending_count(store) == 0
        last = ledger_rows(store)[-1]
        assert (last[1], last[2]) == ("inline", cycle)
        assert last[3] == store.run("inline").head_hash
    store.close()


def test_one_process_leads_the_passes_and_another_takes_over(url: str) -> None:
    a, b = delayed(url), delayed(url)
    first, second = LedgerSequencer(a), LedgerSequencer(b, follow_s=0)
    b.start_run(RunHeader("b", None, None, ("b",), T0), [])
    assert first.tick() == 1 and first.leading()
    b.append_events("b", [AuditEvent("cycle_started", 1, {}, T0 + 1)])
    if b.is_postgres:  # one leader per store: the other process's turns integrate nothing
        assert second.tick() == 0 and not second.leading() and pending_count(b) == 1
    first.stop()  # the leader exits (integrating what is pending) and gives the lead up
    b.append_events("b", [AuditEvent("cycle_started", 2, {}, T0 + 2)])
    assert second.tick() == 1 and second.leading()
    assert [(r[1], r[2]) for r in ledger_rows(b)] == [("b", 0), ("b", 1), ("b", 2)]
    second.stop()
    a.close()
    b.close()


def test_a_committing_process_starts_its_sequencer_and_closing_stops_it(pg_url: str) -> None:
    store = open_store(pg_url)
    store.start_run(RunHeader("live", None, None, ("a",), T0), [])
    runner = store.ledger_timing.runner
    assert isinstance(runner, LedgerSequencer) and runner.every_s == 0.1
    assert runner._thread is not None and runner._thread.is_alive()
    store.close()  # the thread stopped, what it left integrated, the lead given up
    assert store.ledger_timing.runner is None and not runner._thread.is_alive()
    assert runner._lead is None
    store = open_store(pg_url)
    assert pending_count(store) == 0 and ledger_rows(store)[-1][1:3] == ("live", 0)
    store.close()


def test_a_store_dropped_without_close_keeps_no_sequencer_alive(pg_url: str) -> None:
    store = open_store(pg_url)
    store.start_run(RunHeader("dropped", None, None, ("a",), T0), [])
    runner = store.ledger_timing.runner
    assert isinstance(runner, LedgerSequencer) and runner._thread is not None
    dropped = weakref.ref(store)
    del store
    gc.collect()
    assert dropped() is None  # the thread holds it weakly
    runner.wake()
    runner._thread.join(timeout=30)
    assert not runner._thread.is_alive() and runner._lead is None


def test_a_pending_head_is_named_by_verify_and_fails_past_the_bound(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    store = delayed(url, clock)
    with no_end_pass(monkeypatch):
        run(store, "late")
    before = store.anchor()
    clock.now += 9.5
    report = store.verify("late")
    assert report.ok and report.reason is not None
    assert report.reason.startswith(NOT_YET_INTEGRATED) and "9.50 s ago" in report.reason
    clock.now += 1.0  # 10.5 s: past the 10 s bound
    report = store.verify("late")
    assert not report.ok and report.first_bad_seq == store.run("late").last_seq
    assert "is not in the ledger (bound 10 s): no sequencer integrated it" in (report.reason or "")
    assert [r.run_id for r in store.verify_all() if not r.ok] == ["late"]
    # the anchor speaks of integrated entries: taken before, it did not cover the run
    assert int(before.split(":")[0]) == 0
    waiting = pending_count(store)
    assert integrate(store) == waiting == len(ledger_rows(store))
    report = store.verify("late")
    assert report.ok and report.reason is None
    assert int(store.anchor().split(":")[0]) == len(ledger_rows(store)) > 0
    store.close()


def test_converge_verify_names_a_pending_head_and_anchor_integrates_it(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = delayed(pg_url)
    with no_end_pass(monkeypatch):
        run(store, "pending-cli")
    crash(store)
    checked = runner.invoke(app, ["verify", "pending-cli", "--db", pg_url])
    assert checked.exit_code == 0, checked.output
    assert NOT_YET_INTEGRATED in checked.output
    anchored = runner.invoke(app, ["anchor", "--db", pg_url])
    assert anchored.exit_code == 0, anchored.output
    head = anchored.stdout.strip()
    store = open_store(pg_url)
    assert pending_count(store) == 0
    rows = ledger_rows(store)
    assert int(head.split(":")[0]) == len(rows) and rows[-1][2] == store.run("pending-cli").last_seq
    store.close()
    checked = runner.invoke(app, ["verify", "--anchor", head, "--db", pg_url])
    assert checked.exit_code == 0 and NOT_YET_INTEGRATED not in checked.output


def _cut_back(store: SqlRunStore, run_id: str, to: int) -> None:
    """The forger's move: the run's head set back to event ``to`` (its row's
    ``cycles`` with it), the later events deleted, and a pending head made up so
    that the row seems merely not integrated yet."""
    head = chain_hash(store, run_id, to)
    with store.transaction() as conn:
        conn.execute(
            text("DELETE FROM audit_events WHERE run_id = :r AND seq > :s"), {"r": run_id, "s": to}
        )
        conn.execute(
            text(
                "UPDATE runs SET last_seq = :s, head_hash = :h, cycles = (SELECT max(cycle) "
                "FROM audit_events WHERE run_id = :r) WHERE run_id = :r"
            ),
            {"r": run_id, "s": to, "h": head},
        )
        conn.execute(
            text("INSERT INTO ledger_pending VALUES (:r, :s, :h, :t)"),
            {"r": run_id, "s": to, "h": head, "t": store.ledger_timing.clock()},
        )


def test_runs_cut_short_or_deleted_after_integration_are_still_named(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = delayed(url)
    with no_end_pass(monkeypatch):
        for run_id in ("deleted", "bystander"):
            run(store, run_id)
        store.start_run(RunHeader("cut", None, None, ("a",), T0), [])
        for cycle in range(1, 7):
            store.append_events("cut", [AuditEvent("cycle_started", cycle, {}, T0 + cycle)])
        integrate(store)
        run(store, "pending-deleted")
    _cut_back(store, "cut", 3)
    with store.transaction() as conn:
        for run_id in ("deleted", "pending-deleted"):
            for table in ("audit_events", "runs", "checkpoints", "fact_chunks"):
                conn.execute(text(f"DELETE FROM {table} WHERE run_id = :r"), {"r": run_id})
    bad = {r.run_id: r.reason for r in store.verify_all() if not r.ok}
    assert set(bad) == {"cut", "deleted", "pending-deleted"}
    assert (bad["cut"] or "").startswith("run cut short or rewritten below its ledger entry")
    assert bad["deleted"] == "run deleted (named by the ledger)"
    assert bad["pending-deleted"] == "run deleted (named by a head pending for the ledger)"
    # the sequencer integrates the deleted run's heads (the ledger names it now) and
    # drops the made-up one: a head at or below the run's integrated entry
    integrate(store)
    assert pending_count(store) == 0 and max(r[2] for r in ledger_rows(store) if r[1] == "cut") == 6
    bad = {r.run_id: r.reason for r in store.verify_all() if not r.ok}
    assert bad == {
        "cut": "ledger mismatch: the run's head is not the one last committed",
        "deleted": "run deleted (named by the ledger)",
        "pending-deleted": "run deleted (named by the ledger)",
    }
    store.close()


def test_each_signed_batch_head_is_the_ledgers_rfc6962_root(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key, pub = generate_keys(tmp_path / "keys")
    signer = load_signer(key)
    store = delayed(url)
    sequencer = LedgerSequencer(store, signer=signer)
    with no_end_pass(monkeypatch):
        run(store, "a")
        assert sequencer.tick() > 0
        run(store, "b")
        run(store, "c")
        assert sequencer.tick() > 0  # the frontier kept from the pass before, extended
        assert sequencer.tick() == 0
    heads = sorted(
        (h for h in stored_statements(store, "ledger_head")), key=lambda h: int(h["size"])
    )
    tree = ledger_tree(ledger_entries(store))
    assert [h["size"] for h in heads] == [heads[0]["size"], tree.size] and heads[0]["size"] > 0
    for head in heads:
        assert check_signature(signer.public, head) is None
        assert head["root"] == tree.root(head["size"]).hex()
    assert check_consistency(store, heads[0], heads[1], signer.public).ok
    assert pub.exists()
    store.close()


def test_a_version_5_store_is_upgraded_in_place(tmp_path: Path) -> None:
    db = str(tmp_path / "v5.db")
    store = open_store(db)
    run(store, "old")
    with store.transaction() as conn:
        conn.execute(text("DROP TABLE ledger_pending"))
        conn.execute(text("UPDATE converge_meta SET value = '5' WHERE key = 'schema_version'"))
    store.close()
    store = open_store(db)
    with store.transaction(write=False) as conn:
        version = "SELECT value FROM converge_meta WHERE key = 'schema_version'"
        assert conn.execute(text(version)).scalar() == str(SCHEMA_VERSION) == "7"
    assert pending_count(store) == 0
    run(store, "new")
    assert all(r.ok for r in store.verify_all())
    store.close()


def test_the_delay_and_bound_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert (ledger_timing(pg=True).delay, ledger_timing(pg=False).delay) == (0.1, 0.0)
    assert ledger_timing(pg=True).bound == 10.0
    monkeypatch.setenv(LEDGER_DELAY_ENV, "0")
    assert ledger_timing(pg=True).inline  # PostgreSQL integrating in every commit, as before
    monkeypatch.setenv(LEDGER_DELAY_ENV, "250")
    monkeypatch.setenv("CONVERGE_LEDGER_BOUND_S", "0.1")
    assert (ledger_timing(pg=False).delay, ledger_timing(pg=False).bound) == (0.25, 0.25)
    monkeypatch.setenv(LEDGER_DELAY_ENV, "soon")
    with pytest.raises(ConfigurationError, match=LEDGER_DELAY_ENV):
        ledger_timing(pg=True)
