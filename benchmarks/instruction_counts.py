"""W1-W3 for instruction counts: ``python benchmarks/instruction_counts.py NAME SIZE RUNS``.

Builds the workload ``NAME`` (``w1``: a chain of SIZE suggestors; ``w3``: SIZE idle
subscribers, 20 cycles; ``w2``: SIZE x SIZE x 10 facts, no store; ``w2-sqlite``: SIZE x
SIZE x 2 facts into a temporary SQLite store, chain format ``$CONVERGE_CHAIN_FORMAT``,
every run a new run on the same store), runs it once to
warm up and then RUNS times; SIZE 0 only imports. Run under ``valgrind
--tool=callgrind`` twice (RUNS 0 and N): the difference / N is the instructions of
one run, which the machine's load does not change (docs/performance.md); with
``setarch -R`` and the median of three such pairs, ±0.15 % at 20-80 runs.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import Callable

from benchmarks.workloads import build_chain, build_throughput, build_wide_idle
from engine.store import RunStore


def sqlite_store() -> Callable[[], RunStore]:
    """A factory of one SQLite store in a temporary directory (removed at exit)."""
    from audit import open_store

    where = tempfile.mkdtemp(prefix="converge-ic-")
    store = open_store(os.path.join(where, "w2.db"))
    atexit.register(shutil.rmtree, where, True)  # runs after the close below
    atexit.register(store.close)
    return lambda: store


name, size, reps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if size:
    prep = {
        "w1": lambda: build_chain(size),
        "w3": lambda: build_wide_idle(size, 20),
        "w2": lambda: build_throughput(None, size, size, 10),
        "w2-sqlite": lambda: build_throughput(sqlite_store(), size, size, 2),
    }[name]()
    run = prep()
    run()  # warm
    for _ in range(reps):
        run()
