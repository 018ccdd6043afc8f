"""Verification: recompute a run's chain and check against it what queries and
resumes read (the ``runs`` row, gates, checkpoint, fact chunks, ledger entry); the
whole store and its ledger; the ledger head kept outside as an anchor."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy import Connection, func, select

from audit.cells import loads
from audit.core import StoreCore
from audit.ledger import (
    anchor_text,
    claim_reports,
    deleted_pending,
    parse_claim,
    read_head,
    run_in_ledger,
    verify_ledger,
)
from audit.queries import key_problem, parent_problem, read_tombstones, tombstone_problem
from audit.signing import check_run_signatures
from audit.tables import audit_events, gates, ledger, ledger_pending, runs
from audit.trail import (
    REQUEUED,
    ChainRow,
    VerifyReport,
    check_redactions,
    chunks_problem,
    read_checkpoint,
    verify_chain,
)
from audit.verify._crosscheck import Problem, check_checkpoint, check_gates, check_outcome
from audit.verify._exactly_once import check_exactly_once
from audit.verify._row_checks import (
    EventCells,
    check_fact_ids,
    check_gate_columns,
    check_header,
    check_outcome_columns,
    check_status,
    read_events,
    unreadable,
)
from engine.errors import RunNotFound
from engine.hashing.chain import GENESIS, KEYED
from engine.hashing.commitment import chain_parts
from engine.status import RunStatus

_QUEUED_FORK = ["run_started", "checkpoint_saved"]
"""The events of a fork recorded ``queued`` for a worker (``Engine.record_fork``)."""


def verify_run(store: StoreCore, run_id: str) -> VerifyReport:
    """The report of one run: its chain, then its row's outcome, gates, checkpoint,
    fact chunks and ledger entry checked against it (``RunNotFound`` when no row)."""
    with store.transaction(write=False) as conn:
        run = conn.execute(select(runs).where(runs.c.run_id == run_id)).one_or_none()
        if run is None:
            raise RunNotFound(f"no run {run_id!r} in audit store {store.shown}")
        events = read_events(conn, run_id, typed=store.is_postgres)
        rows = events.rows
        gate_rows = conn.execute(select(gates).where(gates.c.run_id == run_id)).all()
        blob = read_checkpoint(conn, run_id)
        # a cell of the wrong type is reported, never read (SQLite keeps any value)
        cells = events.bad or unreadable(run, gate_rows)
        # a head still pending for the sequencer verifies with a note, within the bound
        in_ledger, unintegrated = (
            (None, None)
            if cells
            else run_in_ledger(store, conn, run_id, run.last_seq, run.head_hash, rows)
        )
        chunks = chunks_problem(conn, run_id, blob)
        untouched = (
            not (rows or gate_rows or run.last_seq)
            and blob is None
            and run.head_hash == GENESIS
            and not _named_by_ledger(conn, run_id)
        )
    if cells is not None:
        return VerifyReport(run_id, False, len(rows), cells[0], cells[1])
    if run.status == RunStatus.RUNNING and untouched:
        # taken by a worker that has recorded nothing yet (its job still loading), or
        # whose worker died before it did: the next worker takes it again (take_queued)
        return VerifyReport(run_id, True, 0)
    if run.status == RunStatus.QUEUED and not (
        (run.parent_run_id is not None and [r.kind for r in rows[:3]] == _QUEUED_FORK)
        or any(r.kind == REQUEUED for r in rows)
    ):
        # submitted, not taken yet: nothing is recorded before a worker starts it
        # (but a fork recorded for a worker, or a run put back in the queue after
        # its stop: verified as any run's, its status against its last marker)
        if rows or gate_rows or blob is not None or run.last_seq or run.head_hash != GENESIS:
            return VerifyReport(run_id, False, len(rows), 1, "a queued run holds events")
        return VerifyReport(run_id, True, 0)
    problem = key_problem(store)
    if problem is not None:
        return VerifyReport(run_id, False, len(rows), 1, problem)
    if store.known_fingerprint is not None and chain_parts(run.chain)[0] != KEYED:
        return VerifyReport(run_id, False, len(rows), 1, "chain not keyed")
    report = verify_chain(
        run_id,
        rows,
        head_hash=run.head_hash,
        last_seq=run.last_seq,
        chain=run.chain,
        key=store.key,
    )
    if not report.ok:
        return report
    try:
        found = _first_problem(store, run, rows, gate_rows, events, blob)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        # a chain that verifies holds what its writer chained: only a store whose
        # plain chain was recomputed over other values gets here
        return VerifyReport(run_id, False, len(rows), 1, f"unreadable chain ({exc})")
    for extra in (
        None if chunks is None else (run.last_seq or 1, chunks),
        None if in_ledger is None else (run.last_seq or 1, in_ledger),
    ):
        found = found or extra
    if found is not None:
        return VerifyReport(run_id, False, len(rows), found[0], found[1])
    notes = [unintegrated] if unintegrated is not None else []
    if run.parent_run_id is not None and rows:
        # a fork: its parent's chain up to the fork point still ends in the head it read
        link = parent_problem(store, _forked_from(rows[0]))
        if link is not None and link[1]:
            return VerifyReport(run_id, False, len(rows), 1, link[0])
        notes += [link[0]] if link is not None else []
    return replace(report, reason="; ".join(notes)) if notes else report


def _named_by_ledger(conn: Connection, run_id: str) -> bool:
    """Whether the ledger holds, or waits to integrate, a head of ``run_id``."""
    for table in (ledger, ledger_pending):
        found = conn.execute(select(table.c.run_id).where(table.c.run_id == run_id).limit(1))
        if found.first() is not None:
            return True
    return False


def _forked_from(row: ChainRow) -> Any:
    """The ``forked_from`` of a verified ``run_started`` (None when it is none)."""
    try:
        started = loads(row.payload) if row.kind == "run_started" else None
    except ValueError:
        return None
    return started.get("forked_from") if isinstance(started, dict) else None


def _first_problem(
    store: StoreCore,
    run: Any,
    rows: list[ChainRow],
    gate_rows: Sequence[Any],
    events: EventCells,
    blob: str | None,
) -> Problem:
    """The first of the run's rows (``runs``, gates, checkpoint, events) that
    disagrees with its verified chain, column named (docs/audit.md)."""
    for found in (
        check_outcome(run, rows),
        check_outcome_columns(run, rows),
        check_header(run, rows),
        check_status(run, rows),
        check_gates(gate_rows, rows),
        check_gate_columns(gate_rows, rows),
        check_fact_ids(events.fact_ids),
        check_checkpoint(blob, rows),
        check_exactly_once(rows),
        check_redactions(rows, chain_parts(run.chain)[1]),
        check_run_signatures(store, run.run_id, rows),
    ):
        if found is not None:
            return found
    return None


def verify_all(store: StoreCore) -> list[VerifyReport]:
    """Every run's report (oldest first), then the rows no run or ledger accounts
    for: events of no known run, runs the ledger names but the store lost, a
    broken ledger. A run pruned by ``converge prune`` verifies by its tombstone
    (ok, its reason ``pruned by NAME at T: WHY``; failing when the tombstone was
    changed or the ledger does not commit to it), not as a run deleted."""
    with store.transaction(write=False) as conn:
        ids = list(conn.execute(select(runs.c.run_id).order_by(runs.c.started_at)).scalars())
        orphans = conn.execute(
            select(audit_events.c.run_id, func.min(audit_events.c.seq), func.count())
            .where(audit_events.c.run_id.not_in(select(runs.c.run_id)))
            .group_by(audit_events.c.run_id)
        ).all()
        state = verify_ledger(conn, store.chain_hash)
        deleted = deleted_pending(conn, set(state.latest))
        stones = read_tombstones(conn)
        pruned = {run_id: tombstone_problem(conn, stone) for run_id, stone in stones.items()}
    notes = {run_id: stone.describe() for run_id, stone in stones.items()}
    reports = [
        verify_run(store, run_id)
        if isinstance(run_id, str)
        else VerifyReport(repr(run_id), False, 0, 1, "runs.run_id: not a text (an edited row)")
        for run_id in ids
    ]
    reports.extend(VerifyReport(str(r[0]), False, r[2], r[1], "row inserted") for r in orphans)
    known = set(ids)
    for run_id, (last_seq, _head) in state.latest.items():
        if run_id in known:
            continue
        if run_id not in pruned:
            reports.append(
                VerifyReport(run_id, False, 0, last_seq or 1, "run deleted (named by the ledger)")
            )
            continue
        problem = pruned.pop(run_id)
        # a pruned run: its tombstone, committed to by its last ledger entry
        reports.append(
            VerifyReport(run_id, True, 0, None, notes[run_id])
            if problem is None
            else VerifyReport(run_id, False, 0, last_seq or 1, f"{notes[run_id]}: {problem}")
        )
    reports.extend(
        VerifyReport(run_id, False, 0, 1, problem or "tombstone not in the ledger")
        for run_id, problem in pruned.items()
        if run_id not in known
    )
    reports.extend(deleted)
    if not state.report.ok:
        reports.append(state.report)
    return reports


def anchor(store: StoreCore) -> str:
    """The ledger head, ``seq:hash`` (``seq:hash:keyed:FINGERPRINT`` in a keyed store)."""
    with store.transaction(write=False) as conn:
        seq, digest = read_head(conn)
    return anchor_text(store, seq, digest)


def verify_anchor(store: StoreCore, anchor: str) -> list[VerifyReport]:
    """:func:`verify_all`, plus a report when the ledger no longer holds
    ``anchor``'s entry as it was, or when the anchor names the store keyed and this
    verifier cannot vouch for it (see :mod:`audit.ledger._anchors`; ``ValueError`` for text
    that is not an anchor)."""
    claim = parse_claim(anchor)
    reports = verify_all(store)
    reports.extend(claim_reports(store, claim))
    return reports
