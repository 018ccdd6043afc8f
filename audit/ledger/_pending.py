"""What ``verify`` says of run heads committed and not yet integrated into the ledger
(docs/audit.md, "The ledger's integration delay").

A run whose latest commit waits in ``ledger_pending`` verifies, with a note naming
the head and how long ago it was committed, as long as that is within the store's
bound (:class:`audit.writing._timing.LedgerTiming`); past it, the run fails: no
sequencer integrated it (none ran, or one is held back). What the ledger already
holds of the run must still be in its chain: a run cut short or rewritten below
an integrated entry fails whatever is pending. A pending head of a run that no
longer exists names the deleted run.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, func, select

from audit.core import StoreCore
from audit.ledger import _ledger as ledger_log
from audit.tables import ledger, ledger_pending, runs
from audit.trail import GENESIS, ChainRow, VerifyReport

__all__ = ["NOT_YET_INTEGRATED", "deleted_pending", "run_in_ledger"]

NOT_YET_INTEGRATED = "head committed, not yet integrated into the ledger"
"""The note of a run whose head waits for the sequencer (within the bound)."""

_NOT_THERE = (
    "run not in the ledger",
    "ledger mismatch: the run's head is not the one last committed",
)


def run_in_ledger(
    store: StoreCore,
    conn: Connection,
    run_id: str,
    last_seq: int,
    head: str,
    rows: Sequence[ChainRow],
) -> tuple[str | None, str | None]:
    """(problem, note) of the run's head against the ledger: the problem of
    :func:`audit.ledger._ledger.check_run`, unless the head is pending; then a note while
    within the bound, a problem past it or when an integrated entry of the run is
    no longer in its chain (``rows``)."""
    problem = ledger_log.check_run(conn, store.chain_hash, run_id, last_seq, head)
    if problem not in _NOT_THERE:
        return problem, None
    committed = conn.execute(
        select(ledger_pending.c.committed_at).where(
            ledger_pending.c.run_id == run_id,
            ledger_pending.c.last_seq == last_seq,
            ledger_pending.c.head == head,
        )
    ).scalar()
    if committed is None:
        return problem, None
    latest = conn.execute(
        select(ledger.c.last_seq, ledger.c.head)
        .where(ledger.c.run_id == run_id)
        .order_by(ledger.c.seq.desc())
        .limit(1)
    ).one_or_none()
    if latest is not None:
        at = latest[0]
        if at == 0:  # the run's start with no event: the empty chain's head
            kept: str | None = GENESIS
        else:
            kept = rows[at - 1].hash if at <= len(rows) and rows[at - 1].seq == at else None
        if at > last_seq or kept != latest[1]:
            return f"run cut short or rewritten below its ledger entry (seq {at})", None
    timing = store.ledger_timing
    age = max(timing.clock() - float(committed), 0.0)
    if age > timing.bound:
        return (
            f"head (seq {last_seq}) committed {age:.1f} s ago is not in the ledger (bound "
            f"{timing.bound:g} s): no sequencer integrated it; `converge anchor` or "
            "`converge serve` integrates it"
        ), None
    return None, f"{NOT_YET_INTEGRATED} (seq {last_seq}, committed {age:.2f} s ago)"


def deleted_pending(conn: Connection, named: set[str]) -> list[VerifyReport]:
    """A report per run with a pending head and no ``runs`` row, unless in ``named``
    (the runs the ledger already names as deleted)."""
    found = conn.execute(
        select(ledger_pending.c.run_id, func.max(ledger_pending.c.last_seq))
        .where(ledger_pending.c.run_id.not_in(select(runs.c.run_id)))
        .group_by(ledger_pending.c.run_id)
        .order_by(ledger_pending.c.run_id)
    ).all()
    why = "run deleted (named by a head pending for the ledger)"
    return [VerifyReport(r[0], False, 0, r[1] or 1, why) for r in found if r[0] not in named]
