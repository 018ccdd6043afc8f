"""The hash chain finds tampering: the first bad seq and why.

Rows are altered with raw SQL, as someone with write access to the database
would; ``verify`` must name the first bad ``seq`` and the reason. With a key, a
chain recomputed with plain sha256 does not pass.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from audit import GENESIS, SqlRunStore, open_store
from audit.ledger import entry_message
from audit.trail import event_message
from engine import Budget, Context, Engine, Fact, Proposal, Provenance, fact_to_dict, suggestor
from engine.facts import canonical_json, fact_json


@suggestor(name="count")
def count(ctx: Context) -> list[Proposal]:
    n = ctx.count("k")
    return [Proposal("k", n, parents=(f"k#{n - 1}",) if n else ())]


def record(store: SqlRunStore) -> str:
    """A run of 5 cycles (about 20 events); returns its id."""
    return Engine(budget=Budget(max_cycles=5), store=store).register(count).run().run_id


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "chain.db"


def sql(db: Path, statement: str, *args: object) -> None:
    with sqlite3.connect(db) as con:
        con.execute(statement, args)


def test_an_untouched_run_verifies(db: Path) -> None:
    store = open_store(str(db))
    run_id = record(store)
    report = store.verify(run_id)
    assert report.ok and report.first_bad_seq is None
    assert report.events == store.run(run_id).last_seq > 10


def test_a_changed_payload_is_named_with_its_seq(db: Path) -> None:
    store = open_store(str(db))
    run_id = record(store)
    [target] = [e.seq for e in store.events(run_id, ["fact_promoted"]) if e.payload["content"] == 2]
    sql(
        db,
        "UPDATE audit_events SET payload = replace(payload, '\"content\":2', '\"content\":7') "
        "WHERE run_id = ? AND seq = ?",
        run_id,
        target,
    )
    assert store.facts(run_id)[2].content == 7
    report = store.verify(run_id)
    assert not report.ok
    assert (report.first_bad_seq, report.reason) == (target, "payload changed")


def test_a_deleted_row_is_named_as_missing(db: Path) -> None:
    store = open_store(str(db))
    run_id = record(store)
    sql(db, "DELETE FROM audit_events WHERE run_id = ? AND seq = 6", run_id)
    report = store.verify(run_id)
    assert (report.ok, report.first_bad_seq, report.reason) == (False, 6, "row missing")


def test_a_deleted_last_row_is_named_as_missing(db: Path) -> None:
    store = open_store(str(db))
    run_id = record(store)
    last = store.run(run_id).last_seq
    sql(db, "DELETE FROM audit_events WHERE run_id = ? AND seq = ?", run_id, last)
    report = store.verify(run_id)
    assert (report.first_bad_seq, report.reason) == (last, "row missing")


def test_an_inserted_row_is_named_as_inserted(db: Path) -> None:
    store = open_store(str(db))
    run_id = record(store)
    # make room at seq 5 and slip a row in, as a forger without the chain would
    sql(db, "UPDATE audit_events SET seq = -seq - 1 WHERE run_id = ? AND seq >= 5", run_id)
    sql(db, "UPDATE audit_events SET seq = -seq WHERE run_id = ? AND seq < 0", run_id)
    sql(
        db,
        "INSERT INTO audit_events (run_id, seq, cycle, kind, ts, payload, hash) "
        "VALUES (?, 5, 1, 'fact_promoted', 0.0, '{}', ?)",
        run_id,
        "f" * 64,
    )
    report = store.verify(run_id)
    assert (report.ok, report.first_bad_seq, report.reason) == (False, 5, "row inserted")


def test_an_inserted_row_with_a_recomputed_hash_is_still_caught(db: Path) -> None:
    store = open_store(str(db))
    run_id = record(store)
    events = store.events(run_id)
    sql(db, "UPDATE audit_events SET seq = -seq - 1 WHERE run_id = ? AND seq >= 5", run_id)
    sql(db, "UPDATE audit_events SET seq = -seq WHERE run_id = ? AND seq < 0", run_id)
    forged = hashlib.sha256(
        (
            events[3].hash + event_message(json.dumps(run_id), 5, "cycle_started", 1, 0.0, "{}")
        ).encode()
    ).hexdigest()
    sql(
        db,
        "INSERT INTO audit_events (run_id, seq, cycle, kind, ts, payload, hash) "
        "VALUES (?, 5, 1, 'cycle_started', 0.0, '{}', ?)",
        run_id,
        forged,
    )
    report = store.verify(run_id)
    assert (report.first_bad_seq, report.reason) == (5, "row inserted")


def test_a_row_appended_after_the_head_is_named_as_inserted(db: Path) -> None:
    store = open_store(str(db))
    run_id = record(store)
    last = store.run(run_id).last_seq
    sql(
        db,
        "INSERT INTO audit_events (run_id, seq, cycle, kind, ts, payload, hash) "
        "VALUES (?, ?, 9, 'run_stopped', 0.0, '{}', ?)",
        run_id,
        last + 1,
        "0" * 64,
    )
    report = store.verify(run_id)
    assert (report.first_bad_seq, report.reason) == (last + 1, "row inserted")


def test_an_edited_head_hash_is_a_head_mismatch(db: Path) -> None:
    store = open_store(str(db))
    run_id = record(store)
    last = store.run(run_id).last_seq
    sql(db, "UPDATE runs SET head_hash = ? WHERE run_id = ?", "a" * 64, run_id)
    report = store.verify(run_id)
    assert (report.ok, report.first_bad_seq, report.reason) == (False, last, "head mismatch")


def test_verify_all_reports_every_run_and_orphan_rows(db: Path) -> None:
    store = open_store(str(db))
    good, bad = record(store), record(store)
    sql(db, "UPDATE audit_events SET ts = ts + 1 WHERE run_id = ? AND seq = 3", bad)
    sql(
        db,
        "INSERT INTO audit_events (run_id, seq, cycle, kind, ts, payload, hash) "
        "VALUES ('ghost', 1, 0, 'run_started', 0.0, '{}', 'x')",
    )
    reports = {r.run_id: r for r in store.verify_all()}
    assert reports[good].ok
    assert (reports[bad].first_bad_seq, reports[bad].reason) == (3, "payload changed")
    assert reports["ghost"].reason == "row inserted"


def recompute_plain(db: Path, run_id: str) -> None:
    """Re-chain every row of the run with plain sha256 and fix the head: a full forgery."""
    with sqlite3.connect(db) as con:
        rows = con.execute(
            "SELECT seq, kind, cycle, ts, payload FROM audit_events WHERE run_id = ? ORDER BY seq",
            (run_id,),
        ).fetchall()
        prev = GENESIS
        for seq, kind, cycle, ts, payload in rows:
            message = event_message(json.dumps(run_id), seq, kind, cycle, ts, payload)
            prev = hashlib.sha256((prev + message).encode()).hexdigest()
            con.execute(
                "UPDATE audit_events SET hash = ? WHERE run_id = ? AND seq = ?", (prev, run_id, seq)
            )
        con.execute(
            "UPDATE runs SET head_hash = ?, chain = 'sha256' WHERE run_id = ?", (prev, run_id)
        )


def recompute_ledger_plain(db: Path, run_id: str) -> None:
    """Point the run's latest ledger entry at its forged head and re-chain the ledger."""
    with sqlite3.connect(db) as con:
        head, last = con.execute(
            "SELECT head_hash, last_seq FROM runs WHERE run_id = ?", (run_id,)
        ).fetchone()
        con.execute(
            "UPDATE ledger SET head = ?, last_seq = ? WHERE seq = "
            "(SELECT max(seq) FROM ledger WHERE run_id = ?)",
            (head, last, run_id),
        )
        prev = GENESIS
        entries = con.execute("SELECT seq, run_id, last_seq, head FROM ledger ORDER BY seq")
        for seq, rid, last_seq, h in entries.fetchall():
            prev = hashlib.sha256(
                (prev + entry_message(seq, rid, last_seq, h)).encode()
            ).hexdigest()
            con.execute("UPDATE ledger SET hash = ? WHERE seq = ?", (prev, seq))
            top = seq
        con.execute(
            "UPDATE converge_meta SET value = ? WHERE key = 'ledger_head'", (f"{top}:{prev}",)
        )


def test_without_a_key_a_full_recomputation_goes_unnoticed_but_by_the_anchor(db: Path) -> None:
    # the reason the key and the anchor exist: a plain chain can be rebuilt by anyone
    store = open_store(str(db))
    run_id = record(store)
    anchor = store.anchor()
    # seq 3 is a suggestor_executed event (an altered fact_promoted would also change
    # the facts root its stop recorded, which verify recomputes)
    sql(db, "UPDATE audit_events SET payload = '{}' WHERE run_id = ? AND seq = 3", run_id)
    assert not store.verify(run_id).ok
    recompute_plain(db, run_id)
    assert not store.verify(run_id).ok  # the ledger still holds the head it committed
    recompute_ledger_plain(db, run_id)
    assert store.verify(run_id).ok
    assert all(r.ok for r in store.verify_all())
    # only a head kept outside the database shows it
    assert not all(r.ok for r in store.verify_anchor(anchor))


def test_with_a_key_a_plain_recomputation_does_not_verify(db: Path) -> None:
    store = open_store(str(db), key="s3cret")
    run_id = record(store)
    assert store.verify(run_id).ok
    assert store.run(run_id).chain == "hmac-sha256"
    sql(db, "UPDATE audit_events SET payload = '{}' WHERE run_id = ? AND seq = 4", run_id)
    recompute_plain(db, run_id)
    report = store.verify(run_id)
    assert not report.ok
    # even with the run's mode flipped back to keyed, the plain hashes fail
    sql(db, "UPDATE runs SET chain = 'hmac-sha256' WHERE run_id = ?", run_id)
    report = store.verify(run_id)
    assert (report.ok, report.first_bad_seq, report.reason) == (False, 1, "payload changed")


def test_a_keyed_chain_needs_its_key(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONVERGE_AUDIT_KEY", "from-the-env")
    keyed = open_store(str(db))
    run_id = record(keyed)
    assert keyed.verify(run_id).ok
    assert not open_store(str(db), key="another key").verify(run_id).ok
    monkeypatch.delenv("CONVERGE_AUDIT_KEY")
    report = open_store(str(db)).verify(run_id)
    assert (report.ok, report.reason) == (False, "key required")


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


@given(
    content=json_values,
    key=st.text(min_size=1),
    confidence=st.floats(0.0, 1.0),
    parents=st.lists(st.text(), max_size=3),
)
def test_the_fast_fact_encoding_is_canonical_json(
    content: object, key: str, confidence: float, parents: list[str]
) -> None:
    fact = Fact(f"{key}#0", key, content, confidence, Provenance("s", 2, "s/2/0.0", tuple(parents)))
    assert fact_json(fact) == canonical_json(fact_to_dict(fact))
