"""The registry of workloads: each name ``--only`` takes, and what runs it.

:data:`RUNNERS` maps a name to the function adding its rows to the
:class:`~benchmarks.session.Suite`, in the order the report shows them;
:data:`NAMES` are the names ``--only`` accepts (``w2`` also selects ``w2-sqlite``
and ``w2-pg``, the store rows ``run_w2`` adds). A workload module imports the
harness and the session, never the suite or this registry.
"""

from __future__ import annotations

from collections.abc import Callable

from benchmarks.agents_bench import run_w4
from benchmarks.cli_bench import run_c1
from benchmarks.fork_bench import run_f1
from benchmarks.harness import Row
from benchmarks.ledger_bench import run_w7
from benchmarks.limits import run_limits
from benchmarks.live_bench import run_l1
from benchmarks.metrics_bench import run_m1
from benchmarks.proofs_bench import run_p1
from benchmarks.resume_bench import run_r1
from benchmarks.scale_bench import run_w6
from benchmarks.service_bench import run_s1
from benchmarks.session import Suite, log
from benchmarks.streams_bench import run_l1_streams
from benchmarks.workers_bench import run_w5
from benchmarks.workloads import run_w1, run_w2, run_w3

__all__ = ["NAMES", "RUNNERS", "STORE_ROWS"]

NAMES = (
    "limits",
    "w1",
    "w2",
    "w2-sqlite",
    "w2-pg",
    "w3",
    "r1",
    "q1",
    "w4",
    "w5",
    "w6",
    "s1",
    "p1",
    "f1",
    "w7",
    "l1",
    "l1s",
    "m1",
    "c1",
)
"""Every name ``--only`` accepts, as ``--help`` lists them."""

STORE_ROWS = ("w2-sqlite", "w2-pg")
"""Names selecting rows of the ``w2`` workload rather than a workload of their own."""


def run_q1(suite: Suite) -> None:
    """Q1 from :mod:`benchmarks.audit_bench`, imported only now: it loads the audit
    store and SQLAlchemy, and the row is skipped with a note when they cannot be."""
    try:
        from benchmarks.audit_bench import run_q1 as run
    except ImportError as exc:
        note = f"skipped: benchmarks.audit_bench not importable ({exc})"
        suite.rows.append(Row("Q1 runs --category budget", "—", "ms", False, None, note=note))
        log(f"  Q1: {note}")
        return
    run(suite)


RUNNERS: dict[str, Callable[[Suite], None]] = {
    "limits": run_limits,
    "w1": run_w1,
    "w3": run_w3,
    "w2": run_w2,
    "r1": run_r1,
    "q1": run_q1,
    "w4": run_w4,
    "w5": run_w5,
    "w6": run_w6,
    "s1": run_s1,  # only with --only s1: it needs RabbitMQ and takes ~3 min
    "p1": run_p1,  # proof bundles of a 100k-fact run (issue 26)
    "f1": run_f1,  # fork at cycle 50 of a 100k-fact run (issue 24)
    "w7": run_w7,  # only with --only w7: concurrent runs on one store (issue 31), minutes
    "l1": run_l1,  # event commit → SSE client, 1 and 20 streams (issue 43), ~10 s
    "l1s": run_l1_streams,  # only with --only l1s: 100 idle / 200 busy streams, ~5 min
    "m1": run_m1,  # metrics off / on / on in multiprocess mode on the write path (issue 57)
    "c1": run_c1,  # each command's CPU over its import floor, whole processes (issue 58)
}
"""Each workload's name → the function adding its rows, in the report's order."""
