"""Verification: recompute a run's chain and check against it what queries and
resumes read (the ``runs`` row, gates, checkpoint, fact chunks, ledger entry); the
whole store and its ledger; the ledger head kept outside as an anchor."""

from __future__ import annotations

from sqlalchemy import func, select

from audit import ledger as ledger_log
from audit.chain import GENESIS, KEYED, ChainRow, VerifyReport, verify_chain
from audit.checkpoints import chunks_problem, read_checkpoint
from audit.core import StoreCore
from audit.crosscheck import check_checkpoint, check_gates, check_outcome
from audit.exactly_once import check_exactly_once
from audit.ledger import LEDGER_ID, key_fingerprint, parse_anchor, verify_ledger
from audit.tables import audit_events, gates, runs
from engine.errors import RunNotFound


def _key_problem(store: StoreCore) -> str | None:
    """``wrong key`` / ``key required`` when the verifier's key does not fit the store."""
    stored = store._fingerprint
    if stored is None:
        return None
    if store._key is None:
        return "key required"
    if key_fingerprint(store._key) != stored:
        return "wrong key"
    return None


def verify_run(store: StoreCore, run_id: str) -> VerifyReport:
    """The report of one run: its chain, then its row's outcome, gates, checkpoint,
    fact chunks and ledger entry checked against it (``RunNotFound`` when no row)."""
    with store._tx(write=False) as conn:
        run = conn.execute(select(runs).where(runs.c.run_id == run_id)).one_or_none()
        if run is None:
            raise RunNotFound(f"no run {run_id!r} in audit store {store.shown}")
        rows = [
            ChainRow(r[0], r[1], r[2], r[3], r[4], r[5])
            for r in conn.execute(
                select(
                    audit_events.c.seq,
                    audit_events.c.kind,
                    audit_events.c.cycle,
                    audit_events.c.ts,
                    audit_events.c.payload,
                    audit_events.c.hash,
                )
                .where(audit_events.c.run_id == run_id)
                .order_by(audit_events.c.seq)
            )
        ]
        gate_rows = conn.execute(select(gates).where(gates.c.run_id == run_id)).all()
        blob = read_checkpoint(conn, run_id)
        in_ledger = ledger_log.check_run(conn, store._hash, run_id, run.last_seq, run.head_hash)
        chunks = chunks_problem(conn, run_id, blob)
    if run.status == "queued":
        # submitted, not taken yet: nothing is recorded before a worker starts it
        if rows or gate_rows or blob is not None or run.last_seq or run.head_hash != GENESIS:
            return VerifyReport(run_id, False, len(rows), 1, "a queued run holds events")
        return VerifyReport(run_id, True, 0)
    problem = _key_problem(store)
    if problem is not None:
        return VerifyReport(run_id, False, len(rows), 1, problem)
    if store._fingerprint is not None and run.chain != KEYED:
        return VerifyReport(run_id, False, len(rows), 1, "chain not keyed")
    report = verify_chain(
        run_id,
        rows,
        head_hash=run.head_hash,
        last_seq=run.last_seq,
        chain=run.chain,
        key=store._key,
    )
    if not report.ok:
        return report
    for found in (
        check_outcome(run, rows),
        check_gates(gate_rows, rows),
        check_checkpoint(blob, rows),
        check_exactly_once(rows),
        None if chunks is None else (run.last_seq or 1, chunks),
        None if in_ledger is None else (run.last_seq or 1, in_ledger),
    ):
        if found is not None:
            return VerifyReport(run_id, False, len(rows), found[0], found[1])
    return report


def verify_all(store: StoreCore) -> list[VerifyReport]:
    """Every run's report (oldest first), then the rows no run or ledger accounts
    for: events of no known run, runs the ledger names but the store lost, a
    broken ledger."""
    with store._tx(write=False) as conn:
        ids = list(conn.execute(select(runs.c.run_id).order_by(runs.c.started_at)).scalars())
        orphans = conn.execute(
            select(audit_events.c.run_id, func.min(audit_events.c.seq), func.count())
            .where(audit_events.c.run_id.not_in(select(runs.c.run_id)))
            .group_by(audit_events.c.run_id)
        ).all()
        state = verify_ledger(conn, store._hash)
    reports = [verify_run(store, run_id) for run_id in ids]
    reports.extend(VerifyReport(r[0], False, r[2], r[1], "row inserted") for r in orphans)
    known = set(ids)
    reports.extend(
        VerifyReport(run_id, False, 0, last_seq or 1, "run deleted (named by the ledger)")
        for run_id, (last_seq, _head) in state.latest.items()
        if run_id not in known
    )
    if not state.report.ok:
        reports.append(state.report)
    return reports


def anchor(store: StoreCore) -> str:
    """The ledger head, ``seq:hash``."""
    with store._tx(write=False) as conn:
        seq, digest = ledger_log.read_head(conn)
    return f"{seq}:{digest}"


def verify_anchor(store: StoreCore, anchor: str) -> list[VerifyReport]:
    """:func:`verify_all`, plus a report when the ledger no longer holds
    ``anchor``'s entry as it was (``ValueError`` for text that is not an anchor)."""
    seq, digest = parse_anchor(anchor)
    reports = verify_all(store)
    with store._tx(write=False) as conn:
        state = verify_ledger(conn, store._hash)
    if state.hashes.get(seq) != digest:
        why = (
            "ledger cut short before the anchor"
            if seq > len(state.hashes)
            else ("ledger rewritten before the anchor")
        )
        reports.append(VerifyReport(LEDGER_ID, False, len(state.hashes), seq, why))
    return reports
