"""The tombstones of pruned runs (``converge prune``; docs/audit.md, "Retention"):
read back, described, and checked against the ledger entry that commits to them.

A tombstone keeps what a verifier needs once a run's events, facts and checkpoints
are gone: the run's chain head, last seq, facts count and root when it was removed,
who removed it, when and why. Its digest (:func:`tombstone_digest`, the sha256 of
its canonical JSON) is the head of the run's last ledger entry, so the ledger's
chain, its RFC 6962 tree and every checkpoint signed after the prune commit to it.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, inspect, select

from audit.core import StoreCore
from audit.tables import ledger, pruned_runs
from engine.hashing.canonical import canonical_json

__all__ = [
    "TOMBSTONE_TYPE",
    "Tombstone",
    "pruned_note",
    "read_tombstone",
    "read_tombstones",
    "tombstone_digest",
    "tombstone_problem",
]

TOMBSTONE_TYPE = "converge.tombstone/1"
"""The ``type`` of a tombstone's canonical JSON (what its digest is taken over)."""


@dataclass(frozen=True, slots=True)
class Tombstone:
    """A pruned run, as its ``pruned_runs`` row keeps it (see :data:`audit.tables.pruned_runs`).
    Times are unix seconds."""

    run_id: str
    job: str | None
    parent_run_id: str | None
    stop_kind: str | None
    started_at: float
    ended_at: float | None
    chain: str
    head_hash: str
    last_seq: int
    facts_count: int
    facts_root: str | None
    pruned_by: str
    pruned_at: float
    reason: str
    archive: str | None
    ledger_seq: int = 0
    digest: str = ""

    def committed(self) -> dict[str, Any]:
        """The fields the digest covers (all but ``ledger_seq`` and ``digest``), typed."""
        body = {k: v for k, v in asdict(self).items() if k not in ("ledger_seq", "digest")}
        return {"type": TOMBSTONE_TYPE, **body}

    def describe(self) -> str:
        """``pruned by NAME at ISO-UTC: REASON`` (one line)."""
        when = datetime.fromtimestamp(self.pruned_at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return f"pruned by {self.pruned_by} at {when}: {self.reason}"

    def to_dict(self) -> dict[str, Any]:
        """Every field, JSON-ready."""
        return asdict(self)


def tombstone_digest(tombstone: Tombstone) -> str:
    """The hex sha256 of the tombstone's canonical JSON (:meth:`Tombstone.committed`)."""
    return hashlib.sha256(canonical_json(tombstone.committed()).encode("utf-8")).hexdigest()


def _of(row: Any) -> Tombstone:
    return Tombstone(**{c.name: getattr(row, c.name) for c in pruned_runs.columns})


def read_tombstones(conn: Connection) -> dict[str, Tombstone]:
    """Every tombstone, by run id (none when the store never pruned)."""
    if not inspect(conn).has_table(pruned_runs.name):
        return {}
    return {r.run_id: _of(r) for r in conn.execute(select(pruned_runs)).all()}


def read_tombstone(store: StoreCore, run_id: str) -> Tombstone | None:
    """The tombstone of ``run_id``, or None when it was never pruned."""
    if not store.has_table(pruned_runs.name):
        return None
    with store.transaction(write=False) as conn:
        row = conn.execute(select(pruned_runs).where(pruned_runs.c.run_id == run_id)).first()
    return None if row is None else _of(row)


def pruned_note(store: StoreCore, run_id: str) -> str | None:
    """``pruned by NAME at T: REASON`` when ``run_id`` (or the one pruned run whose id
    starts with it) was pruned, else None."""
    found = read_tombstone(store, run_id)
    if found is None and run_id and store.has_table(pruned_runs.name):
        with store.transaction(write=False) as conn:
            rows = conn.execute(
                select(pruned_runs)
                .where(pruned_runs.c.run_id.startswith(run_id, autoescape=True))
                .limit(2)
            ).all()
        found = _of(rows[0]) if len(rows) == 1 and rows[0].run_id.startswith(run_id) else None
    return None if found is None else found.describe()


def tombstone_problem(conn: Connection, tombstone: Tombstone) -> str | None:
    """Why the tombstone does not hold, or None: its digest must be its fields',
    the ledger entry ``ledger_seq`` must be the run's and carry that digest, the
    run's latest entry, and the entry before it of the run must be the head and
    last seq the tombstone says it was pruned at."""
    if tombstone_digest(tombstone) != tombstone.digest:
        return "tombstone changed (its fields do not hash to its digest)"
    lg = ledger.c
    entries = conn.execute(
        select(lg.seq, lg.last_seq, lg.head)
        .where(lg.run_id == tombstone.run_id)
        .order_by(lg.seq.desc())
        .limit(2)
    ).all()
    if not entries or entries[0][0] != tombstone.ledger_seq or entries[0][2] != tombstone.digest:
        return "tombstone not in the ledger (the run's last ledger entry is not its digest)"
    if len(entries) > 1 and (entries[1][1], entries[1][2]) != (
        tombstone.last_seq,
        tombstone.head_hash,
    ):
        return "tombstone's head is not the run's last head in the ledger"
    return None
