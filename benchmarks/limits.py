"""The raw limits: what the bare interpreter does for the same work, no engine at all.

Our figures are reported as a multiple of these: a plain loop appending frozen
dataclass facts to a dict of lists (the floor of promotion), ``sqlite3``
``executemany`` into an equivalent event table (the floor of an audited fact),
and sha256 chaining of N events (the floor of the tamper-evident trail).
:func:`run_limits` measures the three (``--only limits``) and keeps each one's
cost per item in the suite, for the rows of the other workloads.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

from benchmarks.harness import Prepare, Row, Stat
from benchmarks.session import Suite


@dataclass(frozen=True, slots=True)
class PlainFact:
    """The least a fact can be: key, content, and who proposed it in which cycle."""

    id: str
    key: str
    content: int
    suggestor: str
    cycle: int


def build_plain_loop(n: int, keys: int = 100) -> Callable[[], Callable[[], object]]:
    """Append ``n`` frozen dataclass facts to a dict of lists over ``keys`` keys."""

    def prepare() -> Callable[[], object]:
        def run() -> object:
            by_key: dict[str, list[PlainFact]] = {}
            per = n // keys
            for j in range(keys):
                key = f"w{j}"
                bucket = by_key.setdefault(key, [])
                for c in range(per):
                    bucket.append(PlainFact(f"{key}#{c}", key, c, key, 1))
            return by_key

        return run

    return prepare


def _payload(i: int) -> str:
    return json.dumps({"id": f"w{i % 100}#{i}", "key": f"w{i % 100}", "content": i})


def build_sqlite_executemany(
    n: int, directory: str | None = None
) -> Callable[[], Callable[[], object]]:
    """Insert ``n`` event rows (run, seq, kind, ts, payload, hash) with one executemany (WAL)."""
    rows = [("run", i, "fact_promoted", 0.0, _payload(i), "0" * 64) for i in range(n)]

    def prepare() -> Callable[[], object]:
        tmp = tempfile.mkdtemp(prefix="converge-bench-", dir=directory)
        path = os.path.join(tmp, "limit.db")
        con = sqlite3.connect(path)
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=NORMAL")
        con.execute(
            "CREATE TABLE audit_events (run_id TEXT, seq INTEGER, kind TEXT, ts REAL, "
            "payload TEXT, hash TEXT, PRIMARY KEY (run_id, seq))"
        )
        con.commit()

        def run() -> object:
            with con:
                con.executemany("INSERT INTO audit_events VALUES (?, ?, ?, ?, ?, ?)", rows)
            con.close()
            return path

        return run

    return prepare


def build_sha256_chain(n: int) -> Callable[[], Callable[[], object]]:
    """Chain ``n`` events: ``h = sha256(prev | run | seq | kind | payload)``."""
    payloads = [_payload(i).encode() for i in range(n)]

    def prepare() -> Callable[[], object]:
        def run() -> object:
            prev = b""
            sha = hashlib.sha256
            for seq, payload in enumerate(payloads):
                prev = sha(b"%s|run|%d|fact_promoted|%s" % (prev, seq, payload)).digest()
            return prev

        return run

    return prepare


def run_limits(suite: Suite) -> None:
    """The raw limits: plain loop, sqlite3 executemany, sha256 chain (per item)."""
    n = suite.sizes.limit_n
    cases: list[tuple[str, str, Prepare]] = [
        ("plain loop", "facts/s", build_plain_loop(n)),
        ("sqlite3 executemany", "rows/s", build_sqlite_executemany(n, suite.workdir)),
        ("sha256 chain", "events/s", build_sha256_chain(n)),
    ]
    for name, unit, prepare in cases:
        series = suite.time(prepare)
        suite.limit_cost[name] = series.median / n
        row = Row(
            f"limit: {name}",
            f"{n:,} items",
            unit,
            True,
            Stat.of(series, lambda t: n / t),
        )
        suite.add(row, series)
