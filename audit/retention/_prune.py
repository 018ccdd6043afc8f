"""Retention: remove stopped runs older than a date, keep their proof in the ledger
(``converge prune``; docs/audit.md, "Retention").

:func:`prune` selects the runs that stopped before a time (of one job, or all);
paused, queued and running runs are never selected, nor a run with a fork that has
not stopped (that fork still needs its parent's facts to resume). With an archive
folder, each run's proof bundle is written there first (a run whose bundle cannot
be written is kept). Then, in one transaction per run, under the run's lock and
only if it is still stopped at the head it was selected at, it appends the run's
tombstone to the ledger, keeps the tombstone row, and deletes the run's rows:
events (its model recordings are in them), facts (the fact chunks), gates and their
votes and notifications, checkpoints, actors, cancel requests and its ``runs`` row.
The ledger's entries, its signed heads and checkpoints, the signed facts roots and
the access log are kept.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Table, delete, insert, select

from audit.core import StoreCore
from audit.ledger import append, integrate_pending, require_key
from audit.proofs import export_run, write_bundle
from audit.queries import Tombstone, tombstone_digest
from audit.signing import Signer
from audit.tables import (
    PRUNE_TABLES,
    audit_events,
    checkpoint_parts,
    checkpoints,
    fact_chunks,
    gate_votes,
    gates,
    ledger,
    ledger_pending,
    notification_deliveries,
    pruned_runs,
    run_actors,
    run_cancels,
    run_leases,
    runs,
)
from engine.errors import ConvergeError, PruneError
from engine.status import RunStatus

__all__ = ["PruneReport", "PrunedRun", "prune"]

PRUNE_LOCK = 714527
"""The PostgreSQL advisory lock creating the retention tables."""

_RUN_TABLES: tuple[Table, ...] = (
    notification_deliveries,
    run_actors,
    run_cancels,
    run_leases,
    ledger_pending,
    checkpoint_parts,
    checkpoints,
    fact_chunks,
    audit_events,
    gates,
)
"""The tables holding a run's rows by ``run_id`` (besides ``runs``), deleted in this order."""


@dataclass(frozen=True, slots=True)
class PrunedRun:
    """A run pruned (or, in a dry run, that would be): its id, job, when it stopped
    (unix seconds), its tombstone (None in a dry run) and the bundle archived (its
    path, or None)."""

    run_id: str
    job: str | None
    ended_at: float | None
    tombstone: Tombstone | None = None
    archived: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        out = asdict(self)
        out["tombstone"] = None if self.tombstone is None else self.tombstone.to_dict()
        return out


@dataclass(slots=True)
class PruneReport:
    """What :func:`prune` did: the runs ``pruned`` and those ``kept`` with why
    (run id -> reason), ``before`` (unix seconds), ``dry_run``."""

    before: float
    dry_run: bool
    pruned: list[PrunedRun] = field(default_factory=list)
    kept: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "before": self.before,
            "dry_run": self.dry_run,
            "pruned": [p.to_dict() for p in self.pruned],
            "kept": self.kept,
        }


def _candidates(
    store: StoreCore, before: float, job: str | None
) -> tuple[list[Any], dict[str, str]]:
    """The stopped runs that ended before ``before`` (of ``job``), oldest first, and
    those of them kept because a fork of theirs has not stopped."""
    r = runs.c
    q = select(r.run_id, r.job, r.ended_at, r.started_at, r.last_seq, r.head_hash).where(
        r.status == RunStatus.STOPPED.value, r.ended_at.is_not(None), r.ended_at < before
    )
    if job is not None:
        q = q.where(r.job == job)
    with store.transaction(write=False) as conn:
        rows = conn.execute(q.order_by(r.ended_at, r.run_id)).all()
        live = conn.execute(
            select(r.parent_run_id, r.run_id, r.status).where(
                r.parent_run_id.is_not(None), r.status != RunStatus.STOPPED.value
            )
        ).all()
    kept = {
        parent: f"its fork {fork} is {status}: it still reads its parent's facts"
        for parent, fork, status in live
    }
    return [row for row in rows if row.run_id not in kept], {
        row.run_id: kept[row.run_id] for row in rows if row.run_id in kept
    }


def prune(
    store: StoreCore,
    *,
    before: float,
    by: str,
    reason: str,
    job: str | None = None,
    archive: Path | None = None,
    signer: Signer | None = None,
    dry_run: bool = False,
) -> PruneReport:
    """Prune the runs that stopped before ``before`` (unix seconds; of ``job`` when
    given), as ``by``, for ``reason``; with ``archive`` (a folder, created when
    missing), write each run's proof bundle ``RUN_ID.json`` there first (``signer``
    signs it). ``dry_run``: only say what would be pruned; nothing written.

    Raises ``PruneError`` (an archive without a signer, a folder that cannot be
    written), ``AuditKeyError`` (nothing written) in a keyed store without its key,
    ``StoreError``.
    """
    if archive is not None and signer is None:
        raise PruneError("archiving bundles needs a signing key (--signing-key)")
    report = PruneReport(before, dry_run)
    if not dry_run:
        require_key(store, "pruning runs")  # a tombstone is chained into the ledger
        store.ensure_tables(PRUNE_TABLES, PRUNE_LOCK)
        integrate_pending(store)  # every run head in the ledger before its tombstone
    chosen, report.kept = _candidates(store, before, job)
    if dry_run:
        report.pruned = [PrunedRun(row.run_id, row.job, row.ended_at) for row in chosen]
        return report
    if archive is not None:
        try:
            archive.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise PruneError(f"cannot create the archive {archive}: {exc.strerror}") from exc
    for row in chosen:
        archived = None
        if archive is not None and signer is not None:
            try:
                archived = _archive(store, signer, row.run_id, archive)
            except (ConvergeError, OSError) as exc:
                report.kept[row.run_id] = f"its bundle could not be archived: {exc}"
                continue
        stone = _remove(store, row, by=by, reason=reason, archived=archived)
        if stone is None:
            report.kept[row.run_id] = "it changed while being pruned (resumed or forked)"
            continue
        report.pruned.append(PrunedRun(row.run_id, row.job, row.ended_at, stone, archived))
    return report


def _archive(store: StoreCore, signer: Signer, run_id: str, folder: Path) -> str:
    """Write the run's bundle into ``folder``; ``NAME sha256:HEX`` of the file."""
    path = folder / f"{run_id}.json"
    write_bundle(export_run(store, signer, run_id), path)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return f"{path.name} sha256:{digest}"


def _remove(
    store: StoreCore, selected: Any, *, by: str, reason: str, archived: str | None
) -> Tombstone | None:
    """In one transaction: the run still stopped at the head it was selected at, its
    tombstone into the ledger and ``pruned_runs``, its rows deleted. None when the
    run changed since it was selected (nothing written)."""
    with store.transaction() as conn:
        run = conn.execute(
            select(runs).where(runs.c.run_id == selected.run_id).with_for_update()
        ).one_or_none()
        if (
            run is None
            or run.status != RunStatus.STOPPED.value
            or (run.last_seq, run.head_hash) != (selected.last_seq, selected.head_hash)
        ):
            return None
        stone = Tombstone(
            run_id=run.run_id,
            job=run.job,
            parent_run_id=run.parent_run_id,
            stop_kind=run.stop_kind,
            started_at=float(run.started_at),
            ended_at=None if run.ended_at is None else float(run.ended_at),
            chain=run.chain,
            head_hash=run.head_hash,
            last_seq=int(run.last_seq),
            facts_count=int(run.facts_count),
            facts_root=run.facts_root,
            pruned_by=by,
            pruned_at=time.time(),
            reason=reason,
            archive=archived,
        )
        digest = tombstone_digest(stone)
        append(conn, store.chain_hash, run.run_id, stone.last_seq, digest)
        seq = conn.execute(
            select(ledger.c.seq)
            .where(ledger.c.run_id == run.run_id, ledger.c.head == digest)
            .order_by(ledger.c.seq.desc())
            .limit(1)
        ).scalar_one()
        stone = Tombstone(**{**asdict(stone), "ledger_seq": int(seq), "digest": digest})
        conn.execute(insert(pruned_runs).values(**asdict(stone)))
        _delete_rows(store, conn, run.run_id)
    store.forget_run(run.run_id)
    return stone


def _delete_rows(store: StoreCore, conn: Connection, run_id: str) -> None:
    """Delete every row of the run (the feature tables that exist)."""
    if store.has_table(gate_votes.name):
        gate_ids = select(gates.c.gate_id).where(gates.c.run_id == run_id)
        conn.execute(delete(gate_votes).where(gate_votes.c.gate_id.in_(gate_ids)))
    for table in _RUN_TABLES:
        if table in (notification_deliveries, run_actors, run_cancels) and not store.has_table(
            table.name
        ):
            continue
        conn.execute(delete(table).where(table.c.run_id == run_id))
    conn.execute(delete(runs).where(runs.c.run_id == run_id))
