"""The raw limits: what the bare interpreter does for the same work, no engine at all.

Our figures are reported as a multiple of these: a plain loop appending frozen
dataclass facts to a dict of lists (the floor of promotion), ``sqlite3``
``executemany`` into an equivalent event table (the floor of an audited fact),
and sha256 chaining of N events (the floor of the tamper-evident trail): together
the *one-hash floor*. The *format floor* (issue 58) is what the audit format itself
asks of each fact, with nothing of converge: its canonical JSON (the event's
payload) and its checkpoint row's, the three sha256 (the chain link, the RFC 6962
leaf and its share of the tree's nodes), and one ``executemany`` of the event rows
plus the ``fact_chunks`` row of each cycle, a transaction a cycle; measured on
SQLite (``format floor, SQLite``) and on PostgreSQL (``format floor, PostgreSQL``,
when ``$CONVERGE_TEST_PG_URL`` answers). :func:`run_limits` measures them
(``--only limits``) and keeps each one's cost per item in the suite, for the rows
of the other workloads.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

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


FORMAT_CYCLES = 10
"""Cycles (transactions) the format floor's facts are written in, as W2's."""

_quote: Callable[[str], str] = json.encoder.encode_basestring
_EVENTS_DDL = (
    "CREATE TABLE audit_events (run_id TEXT, seq INTEGER, cycle INTEGER, kind TEXT, "
    "ts DOUBLE PRECISION, payload TEXT, hash TEXT, fact_id TEXT, PRIMARY KEY (run_id, seq))"
)
_CHUNKS_DDL = (
    "CREATE TABLE fact_chunks (run_id TEXT, first INTEGER, data TEXT, digest TEXT, "
    "PRIMARY KEY (run_id, first))"
)


def _format_facts(n: int) -> list[tuple[str, str, int, str]]:
    """``n`` facts as the format reads them: id, key, content, proposal id."""
    return [(f"w{i % 100}#{i}", f"w{i % 100}", i, f"w{i % 100}/1/{i}") for i in range(n)]


def format_cycle(
    facts: list[tuple[str, str, int, str]], first: int, prev: str, cycle: int
) -> tuple[list[tuple[Any, ...]], tuple[Any, ...], str, int]:
    """One cycle of the format: each fact's two canonical texts (the event's payload and
    the checkpoint row, built straight from the values as the fastest encoder would)
    and its three sha256; the event rows, the ``fact_chunks`` row, the chain head and
    how many tree nodes were hashed."""
    sha = hashlib.sha256
    q = _quote
    rows: list[tuple[Any, ...]] = []
    leaves: list[bytes] = []
    texts: list[str] = []
    seq = first
    for fid, key, content, pid in facts:
        qid, qkey, qpid = q(fid), q(key), q(pid)
        text = (
            f'{{"confidence":1.0,"content":{content},"id":{qid},"key":{qkey},'
            f'"provenance":{{"cycle":{cycle},"parents":[],"proposal_id":{qpid},'
            f'"suggestor":{qkey}}}}}'
        )
        texts.append(f"[{qid},{qkey},{content},1.0,{qkey},{cycle},{qpid},[]]")
        message = (
            f'{prev}{{"cycle":{cycle},"kind":"fact_promoted","payload":{text},'
            f'"run_id":"run","seq":{seq},"ts":0.0}}'
        )
        prev = sha(message.encode()).hexdigest()
        leaves.append(sha(b"\x00" + text.encode()).digest())
        rows.append(("run", seq, cycle, "fact_promoted", 0.0, text, prev, qid))
        seq += 1
    nodes = 0
    level = leaves
    while len(level) > 1:  # the tree's n - 1 nodes: each fact's share is one sha256
        paired = [
            sha(b"\x01" + level[i] + level[i + 1]).digest() for i in range(0, len(level) - 1, 2)
        ]
        nodes += len(paired)
        level = paired + ([level[-1]] if len(level) % 2 else [])
    data = "[" + ",".join(texts) + "]"
    return rows, ("run", first, data, sha(data.encode()).hexdigest()), prev, nodes


@contextmanager
def _pg_connection() -> Iterator[Any]:
    """A psycopg connection in a throwaway schema of ``$CONVERGE_TEST_PG_URL``."""
    import psycopg

    from audit.testing import pg_schema

    with pg_schema("converge_floor") as url:
        plain = url.replace("postgresql+psycopg://", "postgresql://", 1)
        with psycopg.connect(plain) as con:
            yield con


def build_format_floor(n: int, connect: Callable[[], Any], marker: str = "?") -> Prepare:
    """The format floor of ``n`` facts in :data:`FORMAT_CYCLES` transactions, on the
    DB-API connection ``connect()`` gives (``marker``: its parameter style; ``%s``,
    psycopg's, writes the event rows with ``COPY`` as the store does on PostgreSQL,
    the fastest way it has to insert rows)."""
    facts = _format_facts(n)
    per = n // FORMAT_CYCLES
    marks8 = ", ".join([marker] * 8)
    marks4 = ", ".join([marker] * 4)

    def prepare() -> Callable[[], object]:
        con = connect()
        cur = con.cursor()
        cur.execute("DROP TABLE IF EXISTS audit_events")
        cur.execute("DROP TABLE IF EXISTS fact_chunks")
        cur.execute(_EVENTS_DDL)
        cur.execute(_CHUNKS_DDL)
        con.commit()

        def run() -> object:
            prev = ""
            for c in range(FORMAT_CYCLES):
                rows, chunk, prev, _ = format_cycle(
                    facts[c * per : (c + 1) * per], c * per, prev, c
                )
                if marker == "%s":
                    # one text buffer a cycle, as the store's writer builds it (the
                    # floor's texts hold no tab, newline or backslash to escape)
                    data = "".join("\t".join(map(str, row)) + "\n" for row in rows)
                    with cur.copy("COPY audit_events FROM STDIN") as copy:
                        copy.write(data)
                else:
                    cur.executemany(f"INSERT INTO audit_events VALUES ({marks8})", rows)
                cur.execute(f"INSERT INTO fact_chunks VALUES ({marks4})", chunk)
                con.commit()
            return prev

        return run

    return prepare


def _sqlite_connect(directory: str | None) -> Callable[[], Any]:
    def connect() -> Any:
        tmp = tempfile.mkdtemp(prefix="converge-bench-", dir=directory)
        con = sqlite3.connect(os.path.join(tmp, "format.db"))
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=NORMAL")
        return con

    return connect


def run_limits(suite: Suite) -> None:
    """The raw limits: plain loop, sqlite3 executemany, sha256 chain (the one-hash floor)
    and the format floor on SQLite and PostgreSQL (per item)."""
    n = suite.sizes.limit_n
    cases: list[tuple[str, str, Prepare]] = [
        ("plain loop", "facts/s", build_plain_loop(n)),
        ("sqlite3 executemany", "rows/s", build_sqlite_executemany(n, suite.workdir)),
        ("sha256 chain", "events/s", build_sha256_chain(n)),
        ("format, SQLite", "facts/s", build_format_floor(n, _sqlite_connect(suite.workdir))),
    ]
    _limit_rows(suite, n, cases)
    try:
        with _pg_connection() as con:
            _limit_rows(
                suite,
                n,
                [("format, PostgreSQL", "facts/s", build_format_floor(n, lambda: con, "%s"))],
            )
    except Exception as exc:  # no PostgreSQL: its W2 row goes without the format floor
        suite.rows.append(
            Row(
                "limit: format, PostgreSQL",
                f"{n:,} items",
                "facts/s",
                True,
                None,
                note=f"skipped: PostgreSQL unreachable ({type(exc).__name__})",
            )
        )


def _limit_rows(suite: Suite, n: int, cases: list[tuple[str, str, Prepare]]) -> None:
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
