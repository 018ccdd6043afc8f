"""``converge runs``' table: each run's status and stop, and the holder and lease of
a running one (docs/scale-out.md)."""

from __future__ import annotations

from audit.queries import ForkLink, RunRow
from converge.cli.render import local_time, print_fitted
from converge.cli.tables import Column


def print_runs(rows: list[RunRow], links: dict[str, ForkLink]) -> None:
    """``converge runs``' table; a fork names its parent and cycle (``forked from``)."""
    rows_text = [
        (
            r.run_id,
            r.job or "",
            r.status,
            # a run not stopped yet (running, crashed) shows its status there
            r.kind or f"({r.status})",
            links[r.run_id].short() if r.run_id in links else "",
            r.category or "",
            str(r.cycles),
            str(r.facts_count),
            local_time(r.started_at)[5:16],  # MM-DD HH:MM: kept at 80 columns
            "" if r.duration_ms is None else str(r.duration_ms),
            lease_text(r),
        )
        for r in rows
    ]
    print_fitted(f"runs ({len(rows)})", RUN_COLUMNS, rows_text)


RUN_COLUMNS = (
    Column("run", whole=True),
    Column("job", priority=1, whole=True),
    Column("status", whole=True),
    # the stop's kind, named as in `runs --json` and `runs --kind`
    Column("kind", whole=True),
    Column("forked from", priority=2, whole=True, optional=True),
    Column("category", priority=4, whole=True),
    Column("cycles", justify="right", whole=True),
    Column("facts", priority=5, justify="right", whole=True),
    Column("started", whole=True),
    Column("ms", priority=6, justify="right", whole=True),
    Column("holder, lease", priority=3, optional=True),
)
"""The columns of ``converge runs``: at 80 columns the run, its status, stop kind,
cycles and start (``MM-DD HH:MM``, local) are kept whole; the others are dropped
from the last (``ms``) up, the job last; ``forked from`` (``PARENT@CYCLE``) is
shown when a listed run is a fork; ``holder, lease`` (``host/pid/start``, the time
its lease has left by the database's clock) when a listed run is running."""


def lease_text(r: RunRow) -> str:
    """``host/pid/start 12.0s`` (lease left) or ``... expired 3.0s ago``; empty without a lease."""
    if r.lease_holder is None or r.lease_left_s is None:
        return ""
    left = r.lease_left_s
    return (
        f"{r.lease_holder} {left:.1f}s"
        if left > 0
        else f"{r.lease_holder} expired {-left:.1f}s ago"
    )
