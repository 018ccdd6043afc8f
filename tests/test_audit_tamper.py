"""The tamper matrix: every mutation an adversarial run got past ``verify``, on plain and
HMAC stores, SQLite and PostgreSQL, is now detected — with the key, or against an
anchor for truncation and deletion (DESIGN.md §7, docs/audit.md)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import Connection, create_engine, text

from audit import SqlRunStore, open_store
from audit.ledger import entry_message
from audit.testing import pg_schema
from audit.trail import GENESIS, event_message, hasher
from engine import GateDecision, HitlGatePending, ResumeError
from tests.hitlfixtures import INITIAL, make_engine
from tests.pgfixtures import require_pg

KEY = "tamper-test-key"


@dataclass
class Recorded:
    """A store with three runs: finished after a decided gate, paused, and a bystander."""

    store: SqlRunStore
    url: str
    keyed: bool
    decided: str  # a run that passed a gate (approved) and finished
    gate: str  # that run's gate
    paused: str  # a run paused at a gate


def _stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Recorded]:
    backend, keyed = request.param
    key = KEY if keyed else None
    if backend == "sqlite":
        yield _record(str(tmp_path / "audit.db"), key)
        return
    require_pg()
    with pg_schema("converge_tamper") as url:
        rec = _record(url, key)
        yield rec
        rec.store.close()


@pytest.fixture(
    params=[("sqlite", False), ("sqlite", True), ("pg", False), ("pg", True)],
    ids=["sqlite-plain", "sqlite-hmac", "pg-plain", "pg-hmac"],
)
def recorded(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Recorded]:
    """Every store: plain and HMAC, SQLite and PostgreSQL."""
    yield from _stores(request, tmp_path)


@pytest.fixture(params=[("sqlite", True), ("pg", True)], ids=["sqlite-hmac", "pg-hmac"])
def keyed(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Recorded]:
    """The HMAC stores."""
    yield from _stores(request, tmp_path)


def _record(url: str, key: str | None) -> Recorded:
    store = open_store(url, key=key)
    first = make_engine(store).run(INITIAL, run_id="decided")
    assert isinstance(first.stop_reason, HitlGatePending)
    gate = first.stop_reason.gate_id
    make_engine(store).resume(gate, GateDecision.approve(by="alice", reason="MIT"))
    second = make_engine(store).run(INITIAL, run_id="paused")
    assert isinstance(second.stop_reason, HitlGatePending)
    make_engine(store).run({"seed": [2]}, run_id="bystander")
    rec = Recorded(store, store.url, key is not None, "decided", gate, "paused")
    assert all(r.ok for r in store.verify_all()), store.verify_all()
    return rec


def _sql(rec: Recorded, fn: Callable[[Connection], None]) -> None:
    engine = create_engine(rec.url)
    try:
        with engine.begin() as conn:
            fn(conn)
    finally:
        engine.dispose()


def _truncate_tail(rec: Recorded) -> str:
    def cut(conn: Connection) -> None:
        last = conn.execute(text("SELECT last_seq FROM runs WHERE run_id = 'decided'")).scalar()
        keep = int(last) - 3
        conn.execute(
            text("DELETE FROM audit_events WHERE run_id = 'decided' AND seq > :k"), {"k": keep}
        )
        head = conn.execute(
            text("SELECT hash FROM audit_events WHERE run_id = 'decided' AND seq = :k"), {"k": keep}
        ).scalar()
        conn.execute(
            text("UPDATE runs SET head_hash = :h, last_seq = :k WHERE run_id = 'decided'"),
            {"h": head, "k": keep},
        )

    _sql(rec, cut)
    return rec.decided


def _update(statement: str, run: str = "decided") -> Callable[[Recorded], str]:
    def mutate(rec: Recorded) -> str:
        _sql(rec, lambda conn: conn.execute(text(statement), {"run": run}))
        return run

    return mutate


def _inject_fact(rec: Recorded) -> str:
    def inject(conn: Connection) -> None:
        blob = conn.execute(text("SELECT data FROM checkpoints WHERE run_id = 'paused'")).scalar()
        data = json.loads(str(blob))
        if isinstance(data["facts"], list):  # a checkpoint that carries its facts
            data["facts"].append(["forged#0", "forged", "x", 1.0, "scan", 1, "scan/1/0.9", []])
            conn.execute(
                text("UPDATE checkpoints SET data = :d WHERE run_id = 'paused'"),
                {"d": json.dumps(data, separators=(",", ":"))},
            )
            return
        # one that refers to the store's fact chunks: forge the last chunk, and its digest
        first, chunk = conn.execute(
            text(
                "SELECT first, data FROM fact_chunks WHERE run_id = 'paused' "
                "ORDER BY first DESC LIMIT 1"
            )
        ).one()
        forged = json.loads(chunk)
        forged[-1][2] = "forged"  # a row: [id, key, content, ...]
        text_ = json.dumps(forged, separators=(",", ":"), sort_keys=True)
        conn.execute(
            text(
                "UPDATE fact_chunks SET data = :d, digest = :h "
                "WHERE run_id = 'paused' AND first = :f"
            ),
            {"d": text_, "h": hashlib.sha256(text_.encode()).hexdigest(), "f": first},
        )

    _sql(rec, inject)
    return rec.paused


MUTATIONS: dict[str, Callable[[Recorded], str]] = {
    "truncate the tail and reset head_hash/last_seq": _truncate_tail,
    "runs.stop_kind and category": _update(
        "UPDATE runs SET stop_kind = 'criteria_met', category = 'success' WHERE run_id = :run"
    ),
    "runs.reason": _update(
        'UPDATE runs SET reason = \'{"criteria":["forged"],"kind":"criteria_met"}\' '
        "WHERE run_id = :run"
    ),
    "runs.facts_count": _update(
        "UPDATE runs SET facts_count = facts_count + 1 WHERE run_id = :run"
    ),
    "runs.facts_root": _update(
        "UPDATE runs SET facts_root = '" + "ab" * 32 + "' WHERE run_id = :run"
    ),
    "a gate's decided_by": _update("UPDATE gates SET decided_by = 'mallory' WHERE run_id = :run"),
    "a gate's status": _update("UPDATE gates SET status = 'rejected' WHERE run_id = :run"),
    "a pending gate marked approved": _update(
        "UPDATE gates SET status = 'approved', decided_by = 'mallory' WHERE run_id = :run",
        "paused",
    ),
    "a fact injected into a paused run's checkpoint": _inject_fact,
}


@pytest.mark.parametrize("mutation", list(MUTATIONS))
def test_a_mutation_is_detected_by_verify(recorded: Recorded, mutation: str) -> None:
    run_id = MUTATIONS[mutation](recorded)
    report = recorded.store.verify(run_id)
    assert not report.ok, report
    assert report.first_bad_seq is not None and report.reason
    assert not all(r.ok for r in recorded.store.verify_all())
    untouched = recorded.store.verify("bystander")
    assert untouched.ok, untouched


def test_a_resume_refuses_a_checkpoint_the_chain_did_not_record(recorded: Recorded) -> None:
    _inject_fact(recorded)
    with pytest.raises(ResumeError, match="differs from the one its chain recorded"):
        make_engine(recorded.store).resume(f"{recorded.paused}-g1", GateDecision.approve(by="bob"))


def test_a_deleted_run_is_named_by_the_ledger(recorded: Recorded) -> None:
    def delete(conn: Connection) -> None:
        for table in ("audit_events", "gates", "checkpoints", "runs"):
            conn.execute(text(f"DELETE FROM {table} WHERE run_id = 'decided'"))

    _sql(recorded, delete)
    bad = [r for r in recorded.store.verify_all() if not r.ok]
    assert [(r.run_id, r.reason) for r in bad] == [("decided", "run deleted (named by the ledger)")]


def _rechain_plain(conn: Connection, run_id: str) -> None:
    h = hasher(None)
    rid = json.dumps(run_id)
    prev = GENESIS
    rows = conn.execute(
        text(
            "SELECT seq, kind, cycle, ts, payload FROM audit_events WHERE run_id = :r ORDER BY seq"
        ),
        {"r": run_id},
    ).all()
    for seq, kind, cycle, ts, payload in rows:
        prev = h(prev, event_message(rid, seq, kind, cycle, ts, payload))
        conn.execute(
            text("UPDATE audit_events SET hash = :h WHERE run_id = :r AND seq = :s"),
            {"h": prev, "r": run_id, "s": seq},
        )
    conn.execute(
        text("UPDATE runs SET head_hash = :h, chain = 'sha256' WHERE run_id = :r"),
        {"h": prev, "r": run_id},
    )


def _rechain_ledger_plain(conn: Connection, drop_run: str | None = None) -> None:
    """Rebuild the ledger with plain sha256 (the forger's move), without ``drop_run``."""
    if drop_run is not None:
        conn.execute(text("DELETE FROM ledger WHERE run_id = :r"), {"r": drop_run})
    h = hasher(None)
    prev = GENESIS
    entries = conn.execute(
        text("SELECT seq, run_id, last_seq, head FROM ledger ORDER BY seq")
    ).all()
    conn.execute(text("DELETE FROM ledger"))
    for n, (_seq, run_id, last_seq, head) in enumerate(entries, 1):
        if run_id != drop_run:
            got = conn.execute(
                text("SELECT head_hash, last_seq FROM runs WHERE run_id = :r"), {"r": run_id}
            ).one()
            if n == max(i for i, e in enumerate(entries, 1) if e[1] == run_id):
                head, last_seq = got
        prev = h(prev, entry_message(n, run_id, last_seq, head))
        conn.execute(
            text(
                "INSERT INTO ledger (seq, run_id, last_seq, head, hash) VALUES (:s, :r, :l, :h, :x)"
            ),
            {"s": n, "r": run_id, "l": last_seq, "h": head, "x": prev},
        )
    conn.execute(
        text("UPDATE converge_meta SET value = :v WHERE key = 'ledger_head'"),
        {"v": f"{len(entries)}:{prev}"},
    )


def test_a_keyed_run_relabelled_plain_and_rechained_does_not_verify(keyed: Recorded) -> None:
    recorded = keyed
    _sql(recorded, lambda conn: _rechain_plain(conn, "decided"))
    _sql(recorded, _rechain_ledger_plain)
    with_key = recorded.store.verify("decided")
    assert not with_key.ok and with_key.reason == "chain not keyed"
    without_key = open_store(recorded.url, key=None)
    os.environ.pop("CONVERGE_AUDIT_KEY", None)
    report = without_key.verify("decided")
    assert not report.ok and report.reason == "key required"
    wrong = open_store(recorded.url, key="not the key").verify("decided")
    assert not wrong.ok and wrong.reason == "wrong key"


def test_a_full_forgery_of_a_plain_store_is_caught_by_the_anchor(recorded: Recorded) -> None:
    anchor = recorded.store.anchor()

    def forge(conn: Connection) -> None:
        for table in ("audit_events", "gates", "checkpoints", "runs"):
            conn.execute(text(f"DELETE FROM {table} WHERE run_id = 'decided'"))
        conn.execute(text("UPDATE audit_events SET payload = payload WHERE run_id = 'x'"))
        _rechain_ledger_plain(conn, drop_run="decided")

    _sql(recorded, forge)
    inside = [r for r in recorded.store.verify_all() if not r.ok]
    if not recorded.keyed:
        assert inside == []  # a plain store rebuilt by its forger looks whole from inside
    else:
        assert inside  # the forger has no key: the ledger does not verify
    against_anchor = [r for r in recorded.store.verify_anchor(anchor) if not r.ok]
    assert against_anchor, "the anchor must show the deletion"


def test_a_ledger_cut_back_with_its_runs_is_caught_by_the_anchor(recorded: Recorded) -> None:
    anchor = recorded.store.anchor()

    def cut(conn: Connection) -> None:
        top = conn.execute(text("SELECT max(seq) FROM ledger WHERE run_id = 'bystander'")).scalar()
        first = conn.execute(
            text("SELECT min(seq) FROM ledger WHERE run_id = 'bystander'")
        ).scalar()
        for table in ("audit_events", "gates", "checkpoints", "runs"):
            conn.execute(text(f"DELETE FROM {table} WHERE run_id = 'bystander'"))
        conn.execute(text("DELETE FROM ledger WHERE seq >= :f"), {"f": first})
        prev = conn.execute(text("SELECT hash FROM ledger WHERE seq = :s"), {"s": int(first) - 1})
        conn.execute(
            text("UPDATE converge_meta SET value = :v WHERE key = 'ledger_head'"),
            {"v": f"{int(first) - 1}:{prev.scalar()}"},
        )
        assert top is not None

    _sql(recorded, cut)
    # the bystander ran last: cutting it and the ledger's tail leaves a consistent store
    assert all(r.ok for r in recorded.store.verify_all())
    assert not all(r.ok for r in recorded.store.verify_anchor(anchor))


def test_an_anchor_of_an_intact_store_verifies(recorded: Recorded) -> None:
    anchor = recorded.store.anchor()
    make_engine(recorded.store).run({"seed": [3]}, run_id="later")
    assert all(r.ok for r in recorded.store.verify_anchor(anchor))
    with pytest.raises(ValueError, match="not a ledger anchor"):
        recorded.store.verify_anchor("12:nothex")


def test_converge_anchor_and_verify_anchor_on_the_command_line(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from converge.cli import app

    db = str(tmp_path / "cli.db")
    rec = _record(db, None)
    runner = CliRunner()
    head = runner.invoke(app, ["anchor", "--db", db]).output.strip()
    assert runner.invoke(app, ["verify", "--anchor", head, "--db", db]).exit_code == 0

    def delete(conn: Connection) -> None:
        for table in ("audit_events", "gates", "checkpoints", "runs"):
            conn.execute(text(f"DELETE FROM {table} WHERE run_id = 'bystander'"))
        _rechain_ledger_plain(conn, drop_run="bystander")

    _sql(rec, delete)
    assert runner.invoke(app, ["verify", "--all", "--db", db]).exit_code == 0
    checked = runner.invoke(app, ["verify", "--anchor", head, "--db", db])
    assert checked.exit_code == 1 and "ledger" in checked.output
    bad = runner.invoke(app, ["verify", "--anchor", "nonsense", "--db", db])
    assert bad.exit_code == 2 and "not a ledger anchor" in bad.output
