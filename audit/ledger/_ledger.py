"""The store-wide ledger of run heads, its anchor, and the key fingerprint (docs/audit.md).

Every commit that extends a run's chain also appends ``(run_id, last_seq, head)``
to the ledger, chained with the store's hash (HMAC with the key). Verification
then catches what a per-run chain cannot: a run cut short (its head set back to an
earlier row) no longer equals its latest ledger entry, and a deleted run is still
named by the ledger. ``anchor`` prints the ledger head (``seq:hash``) to keep
outside the database; ``verify --anchor`` proves nothing before it was removed or
rewritten, even by someone able to recompute plain sha256 chains. The hashing
(an entry's message, the anchor, the key's fingerprint) is :mod:`engine.hashing.ledger`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Connection, insert, select, update

from audit.tables import ledger, meta
from audit.trail import GENESIS, VerifyReport
from engine.hashing.ledger import entry_message, key_fingerprint, parse_anchor

__all__ = [
    "LEDGER_HEAD",
    "LEDGER_ID",
    "LEDGER_SINCE",
    "LedgerState",
    "append",
    "check_run",
    "entry_message",
    "key_fingerprint",
    "parse_anchor",
    "read_head",
    "verify_ledger",
]

LEDGER_HEAD = "ledger_head"
"""``converge_meta`` key of the ledger head, ``"seq:hash"`` (locked by each writer)."""

LEDGER_SINCE = "ledger_since_seq"
"""``converge_meta`` key: runs whose chain began before the ledger (an upgraded
version-1 store) are not checked against it."""

LEDGER_ID = "(ledger)"
"""The ``run_id`` of the reports about the ledger itself."""


def read_head(conn: Connection, *, lock: bool = False) -> tuple[int, str]:
    """The ledger head (seq, hash); ``lock`` holds it until the transaction ends."""
    q = select(meta.c.value).where(meta.c.key == LEDGER_HEAD)
    if lock:
        q = q.with_for_update()
    value = conn.execute(q).scalar()
    if value is None:
        return 0, GENESIS
    return parse_anchor(value)


def append(
    conn: Connection, h: Callable[[str, str], str], run_id: str, last_seq: int, head: str
) -> None:
    """Chain ``(run_id, last_seq, head)`` onto the ledger, in the caller's transaction."""
    seq, prev = read_head(conn, lock=True)
    seq += 1
    digest = h(prev, entry_message(seq, run_id, last_seq, head))
    conn.execute(
        insert(ledger).values(seq=seq, run_id=run_id, last_seq=last_seq, head=head, hash=digest)
    )
    conn.execute(update(meta).where(meta.c.key == LEDGER_HEAD).values(value=f"{seq}:{digest}"))


@dataclass(frozen=True, slots=True)
class LedgerState:
    """The ledger as verified: its report, and the latest (last_seq, head) per run."""

    report: VerifyReport
    latest: dict[str, tuple[int, str]]
    hashes: dict[int, str]


def verify_ledger(conn: Connection, h: Callable[[str, str], str]) -> LedgerState:
    """Recompute the whole ledger; the report names the first bad entry."""
    rows = conn.execute(
        select(
            ledger.c.seq, ledger.c.run_id, ledger.c.last_seq, ledger.c.head, ledger.c.hash
        ).order_by(ledger.c.seq)
    ).all()
    latest: dict[str, tuple[int, str]] = {}
    hashes: dict[int, str] = {}
    prev = GENESIS
    n = len(rows)

    def done(bad: int | None, reason: str | None) -> LedgerState:
        report = VerifyReport(LEDGER_ID, bad is None, n, bad, reason)
        return LedgerState(report, latest, hashes)

    for expected, (seq, run_id, last_seq, head, digest) in enumerate(rows, 1):
        if seq != expected:
            return done(expected, "ledger entry missing")
        if h(prev, entry_message(seq, run_id, last_seq, head)) != digest:
            return done(seq, "ledger entry changed")
        latest[run_id] = (last_seq, head)
        hashes[seq] = digest
        prev = digest
    head_seq, head_hash = read_head(conn)
    if (head_seq, head_hash) != (n, prev):
        return done(head_seq or 1, "ledger head mismatch")
    return done(None, None)


def check_run(
    conn: Connection, h: Callable[[str, str], str], run_id: str, last_seq: int, head: str
) -> str | None:
    """Why the run's latest ledger entry disagrees with its ``runs`` row, or None.

    Checks that one entry's own hash against its predecessor (O(1), not the whole
    ledger); ``verify --all`` recomputes the whole ledger.
    """
    since = conn.execute(select(meta.c.value).where(meta.c.key == LEDGER_SINCE)).scalar()
    row = conn.execute(
        select(ledger.c.seq, ledger.c.last_seq, ledger.c.head, ledger.c.hash)
        .where(ledger.c.run_id == run_id)
        .order_by(ledger.c.seq.desc())
        .limit(1)
    ).one_or_none()
    if row is None:
        if since is not None and int(since) > 0:
            return None  # a run recorded before this store had a ledger
        return "run not in the ledger"
    seq, entry_last, entry_head, digest = row
    prev = conn.execute(select(ledger.c.hash).where(ledger.c.seq == seq - 1)).scalar()
    if h(prev or GENESIS, entry_message(seq, run_id, entry_last, entry_head)) != digest:
        return "ledger entry changed"
    if (entry_last, entry_head) != (last_seq, head):
        return "ledger mismatch: the run's head is not the one last committed"
    return None
