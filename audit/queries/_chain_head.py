"""A run's chain verified up to one of its cycles: what a fork takes from its parent.

A fork starts from its parent's facts and counters up to the fork point (it refers
to the facts by their root and frontier), so the parent's chain is recomputed up
to there before anything is taken (:func:`verified_head`):
its events ``1..S`` (``S`` the last event of cycles up to the fork point) and the
link of event ``S + 1`` onto ``S`` (or, when ``S`` is the last, the ``runs`` row's
head), so that an event rewritten with a recomputed hash shows too; and, in a
store without a key, where the whole chain could be recomputed, against the
ledger: every head the ledger integrated for the run up to the first one at or
past the fork point must be the chain's hash at that seq. The fork
records the head it read, ``parent_head: {seq, chain_hash}`` in its
``forked_from``; :func:`parent_problem` checks it again when the fork is verified:
a parent altered after the fork then fails the fork's verify, naming the parent
and the seq. A parent no longer in the store is not checked (the fork's own
``run_started`` chains the root and frontier of the facts it took).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, func, select

from audit.core import StoreCore
from audit.queries._pruned import pruned_note
from audit.tables import audit_events, ledger, runs
from audit.trail import CHAIN_COLUMNS, ChainRow, VerifyReport, verify_chain
from engine.errors import RunNotFound
from engine.hashing.ledger import key_fingerprint

__all__ = ["chain_prefix", "key_problem", "last_seq_of_cycle", "parent_problem", "verified_head"]


def key_problem(store: StoreCore) -> str | None:
    """``wrong key`` / ``key required`` when the verifier's key does not fit the store."""
    stored = store.known_fingerprint
    if stored is None:
        return None
    if store.key is None:
        return "key required"
    if key_fingerprint(store.key) != stored:
        return "wrong key"
    return None


def last_seq_of_cycle(conn: Connection, run_id: str, cycle: int) -> int:
    """The seq of the run's last event of cycles up to ``cycle`` (0: none)."""
    ev = audit_events.c
    found = conn.execute(
        select(func.max(ev.seq)).where(ev.run_id == run_id, ev.cycle <= cycle)
    ).scalar()
    return int(found or 0)


def chain_prefix(
    store: StoreCore, conn: Connection, run_id: str, last: int
) -> tuple[VerifyReport, list[ChainRow]]:
    """The report of the run's chain over events ``1..last`` and the link of event
    ``last + 1`` onto them (the ``runs`` row's head when ``last`` is the last) and
    through the first head the ledger holds at or past ``last``, with the rows read
    (``1..`` that seq), each head the ledger holds for the run among them checked.
    Raises ``RunNotFound``; never raises for a bad chain or an unreadable cell (the
    report says where)."""
    row = conn.execute(
        select(runs.c.head_hash, runs.c.last_seq, runs.c.chain).where(runs.c.run_id == run_id)
    ).one_or_none()
    if row is None:
        raise RunNotFound(f"no run {run_id!r} in audit store {store.shown}")
    lg = ledger.c
    sealed = conn.execute(
        select(func.min(lg.last_seq)).where(lg.run_id == run_id, lg.last_seq >= last + 1)
    ).scalar()
    through = max(last + 1, int(sealed or 0))
    ev = audit_events.c
    rows = list(
        map(
            ChainRow._make,
            conn.execute(
                select(*CHAIN_COLUMNS)
                .where(ev.run_id == run_id, ev.seq <= through)
                .order_by(ev.seq)
            ).all(),
        )
    )
    problem = key_problem(store)
    if problem is not None:
        return VerifyReport(run_id, False, len(rows), 1, problem), rows
    following = rows[-1] if rows and rows[-1].seq > last else None
    # the later events' hashes seal the prefix: check the chain through them
    head, end = (following.hash, following.seq) if following else (row.head_hash, row.last_seq)
    try:
        report = verify_chain(
            run_id, rows, head_hash=head, last_seq=end, chain=row.chain, key=store.key
        )
    except (TypeError, ValueError, AttributeError) as exc:  # a cell of another type
        report = VerifyReport(run_id, False, len(rows), 1, f"unreadable chain ({exc})")
    if report.ok:
        report = _against_ledger(conn, run_id, rows, report)
    return report, rows


def _against_ledger(
    conn: Connection, run_id: str, rows: list[ChainRow], report: VerifyReport
) -> VerifyReport:
    """``report``, or a failing one at the first head the ledger integrated for
    the run (within ``rows``) that is not the chain's hash at its seq: a chain
    recomputed after an edit (docs/audit.md, "The ledger")."""
    if not rows:
        return report
    hashes = {r.seq: r.hash for r in rows}
    lg = ledger.c
    entries = conn.execute(
        select(lg.last_seq, lg.head)
        .where(lg.run_id == run_id, lg.last_seq <= rows[-1].seq)
        .order_by(lg.last_seq)
    ).all()
    for seq, head in entries:
        if seq in hashes and hashes[seq] != head:
            return VerifyReport(run_id, False, len(rows), seq, "ledger head mismatch")
    return report


def verified_head(
    store: StoreCore, conn: Connection, run_id: str, cycle: int
) -> tuple[VerifyReport, list[ChainRow], tuple[int, str] | None]:
    """:func:`chain_prefix` up to the run's last event of cycles up to ``cycle``,
    and that event's ``(seq, hash)`` when the report is ok (None otherwise)."""
    last = last_seq_of_cycle(conn, run_id, cycle)
    report, rows = chain_prefix(store, conn, run_id, last)
    head = (last, rows[last - 1].hash) if report.ok and last > 0 else None
    return report, rows, head


def parent_problem(store: StoreCore, link: Any) -> tuple[str, bool] | None:
    """What is wrong with a fork's link to its parent, as ``(why, checked)``.

    ``link`` is the fork's ``forked_from``. None when the link carries no
    ``parent_head`` (a fork recorded before forks recorded it) or the parent's
    chain still hashes to it; ``(note, False)`` when the parent is not in the
    store (the link cannot be checked); ``(why, True)`` naming the parent and the
    seq when the parent's chain up to there fails or no longer ends in that head.
    """
    if not isinstance(link, dict) or not isinstance(link.get("parent_head"), dict):
        return None
    parent, head = link.get("run"), link["parent_head"]
    seq, digest = head.get("seq"), head.get("chain_hash")
    if not isinstance(parent, str) or type(seq) is not int or seq < 1:
        return "forked_from.parent_head is not {seq, chain_hash}", True
    try:
        with store.transaction(write=False) as conn:
            report, rows = chain_prefix(store, conn, parent, seq)
    except RunNotFound:
        note = pruned_note(store, parent)
        if note is not None:
            return f"parent run {parent} was {note}: its link was not checked", False
        return f"parent run {parent} is not in the store: its link was not checked", False
    if not report.ok:
        return (
            f"parent run {parent} changed since the fork: seq {report.first_bad_seq}: "
            f"{report.reason}"
        ), True
    if len(rows) < seq or rows[seq - 1].hash != digest:
        return f"parent run {parent} changed since the fork: seq {seq}: head mismatch", True
    return None
