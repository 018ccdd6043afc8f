"""The audited write path: number and chain a cycle's events, then insert them in bulk.

:func:`chain_batch` turns an event batch into rows: one hash per event, with the
exact bytes of :func:`engine.hashing.chain.event_message`, in one pass. A
:class:`engine.store.PromotedFacts` item (the facts of a merge, their canonical JSON
already built by the engine) is chained in a tight loop over its texts and kept as
one :class:`FactRows` segment, so that :class:`BulkInserter` can hand it to the
database in one statement: on SQLite an ``INSERT ... SELECT`` over ``json_each`` of
the payloads joined into one JSON array (SQLite copies each element's text
verbatim, checked once per store by :meth:`BulkInserter.verbatim`; else it falls back
to ``executemany``); on PostgreSQL one ``COPY`` fed one text buffer.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Engine, insert

from audit.tables import audit_events, fact_chunks
from audit.writing._spliced import started_json
from engine.errors import StoreError
from engine.facts import canonical_json, fact_from_dict, fact_json, fact_row
from engine.hashing.chain import event_message, fact_links, hasher
from engine.hashing.checkpoint import checkpoint_digest
from engine.hashing.checkpoint import fold_digest as fold_digest
from engine.hashing.commitment import (
    COMMITTED_WRAP,
    SALT_TAIL,
    commitment,
    commitments_digest,
    committed_payload,
    committed_text,
    fact_commitment,
    salt_of_text,
)
from engine.store import BatchItem, PromotedFacts

EVENT_COLUMNS = ("run_id", "seq", "cycle", "kind", "ts", "payload", "hash", "fact_id")
"""The ``audit_events`` columns, in the order the write path builds its rows."""
_IDENTITY = tuple(range(len(EVENT_COLUMNS)))
_COPY_EVENTS = f"COPY audit_events ({', '.join(EVENT_COLUMNS)}) FROM STDIN"
_quote: Callable[[str], str] = json.encoder.encode_basestring
_HEX = 64  # characters of one hex sha256

# key 0 of json_each is the first element: seq0 is the segment's first seq
# fact ids (JSON-quoted, so control characters are escaped and none ends in a space)
# come padded to one width per segment: each row takes its own with substr, as its hash
_SQLITE_FACTS = (
    "INSERT INTO audit_events (run_id, seq, cycle, kind, ts, payload, hash, fact_id) "
    "SELECT ?1, ?2 + key, ?3, 'fact_promoted', ?4, value, "
    f"CAST(substr(?5, key * {_HEX} + 1, {_HEX}) AS TEXT), "
    "rtrim(CAST(substr(?7, key * ?8 + 1, ?8) AS TEXT)) FROM json_each(?6)"
)
# what json_each must give back unchanged: escapes, exponents, big and negative
# numbers, non-ASCII and astral characters, nesting, empty containers
_PROBE = [
    '{"a":1e-05,"b":"\\u00e9\\n\\"x\\\\","c":[1.5,-0.0,12345678901234567890123],'
    '"d":"é😀\u2028","e":{},"f":[],"g":null,"h":true,"i":-7}',
    '{"confidence":1.0,"content":"w","id":"k#0","key":"k","provenance":{"cycle":1,'
    '"parents":["a\\tb"],"proposal_id":"s/1/0.0","suggestor":"s"}}',
]


@dataclass(slots=True)
class FactRows:
    """The chained rows of one :class:`PromotedFacts` item: ``seq0`` is the first seq;
    ``ids`` the facts' ids as JSON strings (the ``fact_id`` column)."""

    seq0: int
    cycle: int
    ts: float
    texts: list[str]
    hashes: list[str]
    ids: list[str]

    def numbered(self) -> Iterator[tuple[int, str, str, str]]:
        """``(seq, text, hash, fact_id)`` of each fact, in order."""
        return zip(
            range(self.seq0, self.seq0 + len(self.texts)),
            self.texts,
            self.hashes,
            self.ids,
            strict=True,
        )


@dataclass(slots=True)
class ChainedBatch:
    """An event batch numbered and chained after (``prev``, ``seq``).

    ``rows`` are single events as tuples in :data:`EVENT_COLUMNS` order, ``facts``
    the fact segments; ``head``/``seq`` the new chain head, ``promoted`` the facts
    the batch promotes and ``top`` its highest cycle (what the rows prove);
    ``chunk`` the canonical JSON of every fact the batch adds to the run (initial
    facts, then promoted ones), in order: its ``fact_chunks`` row.
    """

    run_id: str
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    facts: list[FactRows] = field(default_factory=list)
    chunk: list[str] = field(default_factory=list)
    head: str = ""
    seq: int = 0
    promoted: int = 0
    top: int = 0
    commits: list[str] | None = None
    """(chain format 2) the commitment of each row of ``chunk``: its digest's data."""

    _chunk_row: tuple[str, str] | None = None

    def __len__(self) -> int:
        return len(self.rows) + sum(len(f.texts) for f in self.facts)

    def event_rows(self) -> list[tuple[Any, ...]]:
        """Every event row of the batch as a tuple in :data:`EVENT_COLUMNS` order: the
        single events, then one ``fact_promoted`` row per fact."""
        rid = self.run_id
        return [
            *self.rows,
            *[
                (rid, seq, seg.cycle, "fact_promoted", seg.ts, text, digest, fid)
                for seg in self.facts
                for seq, text, digest, fid in seg.numbered()
            ],
        ]

    def chunk_row(self) -> tuple[str, str]:
        """The ``fact_chunks`` data of the batch and its sha256 (hex), built once."""
        if self._chunk_row is None:
            data = "[" + ",".join(self.chunk) + "]"
            commits = self.commits
            digest = checkpoint_digest(data) if commits is None else commitments_digest(commits)
            self._chunk_row = (data, digest)
        return self._chunk_row


Prediction = tuple[str, int, int, str | None]
"""What a run's queued batches leave: chain head, seq, facts, and the digest chain of
its fact chunks (None when they do not tile the facts)."""


@dataclass(slots=True)
class QueuedBatch:
    """A batch waiting for the writer thread: its ``events`` and their rows chained
    after ``known`` (head, seq, facts); with a periodic ``checkpoint``, its text
    ``blob`` and its chained ``checkpoint_saved`` event (``saved``)."""

    events: Sequence[BatchItem]
    batch: ChainedBatch
    known: tuple[str, int, int]
    checkpoint: dict[str, Any] | None = None
    blob: str | None = None
    saved: ChainedBatch | None = None


def chain_batch(
    run_id: str,
    events: Sequence[BatchItem],
    prev: str,
    seq: int,
    key: bytes | None,
) -> ChainedBatch:
    """Number and chain ``events`` after (``prev``, ``seq``) with sha256, or HMAC-SHA256
    under ``key``; raises ``StoreError`` for a payload that is not JSON.

    Facts of chain format 2 (the engine salted them: ``PromotedFacts.commits``, a
    ``run_started`` whose initial facts carry a ``salt``) are chained through their
    commitments (:func:`engine.hashing.commitment.committed_payload`), and the
    batch's chunk digest is of their commitments."""
    out = ChainedBatch(run_id)
    rid = _quote(run_id)
    h = hasher(key)
    append = out.rows.append
    top = 0
    try:
        for ev in events:
            cycle = ev.cycle
            if cycle > top:
                top = cycle
            if isinstance(ev, PromotedFacts):
                if ev.texts:
                    segment, prev = _chain_facts(ev, rid, prev, seq, key)
                    out.facts.append(segment)
                    if ev.commits:
                        out.commits = (out.commits or []) + ev.commits
                    if len(ev.rows) == len(ev.facts):
                        out.chunk.extend(ev.rows)
                    else:
                        out.chunk.extend([canonical_json(fact_row(f)) for f in ev.facts])
                    seq += len(ev.texts)
                    out.promoted += len(ev.texts)
                continue
            seq += 1
            kind = ev.kind
            fact = ev.fact
            if fact is not None:
                payload = ev.text or fact_json(fact)
            elif ev.fact_texts is not None and kind == "run_started":
                payload = started_json(ev.payload, ev.fact_texts)
            else:
                payload = canonical_json(ev.payload)
            ts = float(ev.ts)
            chained = payload
            # a salted fact (a gate's batch split, a replay): its commitment hashed once
            salt = salt_of_text(payload) if fact is not None else None
            if salt is not None:
                c = commitment(salt, payload[:-SALT_TAIL] + "}")
                chained = committed_text(c)
            elif (fact is not None and payload.endswith('"}') and ',"salt":"' in payload) or (
                kind == "run_started" and _salted(ev.payload)
            ):
                chained = committed_payload(kind, payload)
            prev = h(prev, event_message(rid, seq, kind, cycle, ts, chained))
            fid = None if fact is None else _quote(fact.id)
            append((run_id, seq, cycle, kind, ts, payload, prev, fid))
            if fact is not None:
                out.promoted += 1
                if chained is not payload:
                    if salt is None:  # not at its tail: as parsed
                        data = json.loads(payload)
                        salt, c = data["salt"], fact_commitment(data)
                    out.chunk.append(canonical_json([*fact_row(fact), salt]))
                    if out.commits is None:
                        out.commits = []
                    out.commits.append(c)  # in place: one copy a fact was O(n²) a batch
                else:
                    out.chunk.append(canonical_json(fact_row(fact)))
            elif kind == "run_started":
                initial = ev.payload.get("initial_facts") or ()
                texts = ev.fact_texts
                if chained is not payload:
                    rows = [[*fact_row(fact_from_dict(f)), f["salt"]] for f in initial]
                    out.chunk[:0] = [canonical_json(r) for r in rows]
                    out.commits = [fact_commitment(f) for f in initial] + (out.commits or [])
                elif texts is not None and len(texts) == len(initial):
                    # fact dicts as chunk rows (engine._cycle.run loads both forms)
                    out.chunk[:0] = texts
                else:
                    out.chunk[:0] = [canonical_json(fact_row(fact_from_dict(f))) for f in initial]
    except (TypeError, ValueError) as exc:
        raise StoreError(f"audit event {seq + 1} of run {run_id} is not JSON: {exc}") from exc
    out.head, out.seq, out.top = prev, seq, top
    return out


def _salted(payload: dict[str, Any]) -> bool:
    """Whether a ``run_started`` payload's initial facts are of chain format 2."""
    initial = payload.get("initial_facts")
    if not isinstance(initial, list) or not initial:
        return False
    first = initial[0]
    return isinstance(first, dict) and "salt" in first


def _chain_facts(
    ev: PromotedFacts, rid: str, prev: str, seq: int, key: bytes | None
) -> tuple[FactRows, str]:
    """The hashes of ``ev``'s facts (:func:`engine.hashing.chain.fact_links`: one
    call per segment, the hot loop of an audited run); of chain format 2, of their
    commitments' texts (``{"commitment":C}``)."""
    cycle, ts, texts = ev.cycle, float(ev.ts), ev.texts
    if ev.commits:  # each payload chained as {"commitment":"C"}, wrapped in fact_links
        hashes, prev = fact_links(prev, seq, rid, cycle, ts, ev.commits, key, COMMITTED_WRAP)
    else:
        hashes, prev = fact_links(prev, seq, rid, cycle, ts, texts, key)
    return FactRows(seq + 1, cycle, ts, texts, hashes, [_quote(f.id) for f in ev.facts]), prev


class BulkInserter:
    """Inserts a :class:`ChainedBatch` on one SQLAlchemy engine (SQLite or PostgreSQL)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._pg = engine.dialect.name == "postgresql"
        self._sqlite = engine.dialect.name == "sqlite"
        self._verbatim: bool | None = None
        self._insert_sql: str | None = None
        self._positions: tuple[int, ...] | None = None

    def insert(self, conn: Connection, batch: ChainedBatch, first: int) -> None:
        """Insert every row of ``batch``, and its fact chunk from fact number ``first``,
        in the caller's transaction."""
        if batch.chunk:
            data, digest = batch.chunk_row()
            conn.execute(
                insert(fact_chunks).values(
                    run_id=batch.run_id,
                    first=first,
                    count=len(batch.chunk),
                    data=data,
                    digest=digest,
                )
            )
        if self._pg and len(batch) > 1:
            self._copy(conn, batch)
            return
        if batch.facts and self._sqlite and self.verbatim(conn):
            for seg in batch.facts:
                # bytes, as the hashes: substr on a blob is O(1), on text O(n)
                ids = [i.encode() for i in seg.ids]
                width = max(map(len, ids))
                conn.exec_driver_sql(
                    _SQLITE_FACTS,
                    (
                        batch.run_id,
                        seg.seq0,
                        seg.cycle,
                        seg.ts,
                        "".join(seg.hashes).encode(),
                        "[" + ",".join(seg.texts) + "]",
                        b"".join([i.ljust(width) for i in ids]),
                        width,
                    ),
                )
            rows = batch.rows
        else:
            rows = batch.event_rows()
        if rows:
            self._executemany(conn, rows)

    def verbatim(self, conn: Connection) -> bool:
        """Whether this SQLite gives ``json_each`` elements back byte for byte (once)."""
        if self._verbatim is None:
            try:
                got = [
                    r[0]
                    for r in conn.exec_driver_sql(
                        "SELECT value FROM json_each(?) ORDER BY key",
                        ("[" + ",".join(_PROBE) + "]",),
                    )
                ]
            except Exception:  # no JSON functions in this SQLite build
                got = []
            self._verbatim = got == _PROBE
        return self._verbatim

    def _executemany(self, conn: Connection, rows: list[tuple[Any, ...]]) -> None:
        """One executemany of the Core ``INSERT``, compiled once per store."""
        sql = self._insert_sql
        if sql is None:
            compiled = insert(audit_events).compile(
                dialect=self._engine.dialect, column_keys=list(EVENT_COLUMNS)
            )
            order = compiled.positiontup
            if compiled.positional and order is not None:
                self._positions = tuple(EVENT_COLUMNS.index(name) for name in order)
            sql = self._insert_sql = str(compiled)
        pos = self._positions
        if pos is None:
            params: list[Any] = [dict(zip(EVENT_COLUMNS, r, strict=True)) for r in rows]
        elif pos == _IDENTITY:
            params = rows
        else:
            params = [tuple(r[i] for i in pos) for r in rows]
        conn.exec_driver_sql(sql, params)

    def _copy(self, conn: Connection, batch: ChainedBatch) -> None:
        """One ``COPY``: single rows through psycopg, fact segments as one text buffer."""
        raw = conn.connection.driver_connection
        run = _copy_text(batch.run_id)
        with raw.cursor() as cur, cur.copy(_COPY_EVENTS) as copy:  # type: ignore[union-attr]
            for row in batch.rows:
                copy.write_row(row)
            for seg in batch.facts:
                head = f"{run}\t"
                body = f"\t{seg.cycle}\tfact_promoted\t{seg.ts!r}\t"
                texts, ids = _copy_texts(seg.texts), _copy_texts(seg.ids)
                seqs = range(seg.seq0, seg.seq0 + len(texts))
                copy.write(
                    "".join(
                        [
                            f"{head}{seq}{body}{text}\t{digest}\t{fid}\n"
                            for seq, text, digest, fid in zip(
                                seqs, texts, seg.hashes, ids, strict=True
                            )
                        ]
                    )
                )


def _copy_texts(values: list[str]) -> list[str]:
    """``values`` escaped for COPY, each as :func:`_copy_text`; looked for in one
    pass over their join, so that the usual segment (nothing to escape: no
    backslash in its JSON) costs no call per row (the buffer is built holding the
    GIL, beside the engine's next cycle)."""
    joined = "".join(values)
    if "\\" in joined or "\t" in joined or "\n" in joined or "\r" in joined:
        return [_copy_text(v) for v in values]
    return values


def _copy_text(value: str) -> str:
    """``value`` escaped for PostgreSQL's COPY text format (canonical JSON holds no
    raw control characters, so only backslashes need doubling)."""
    if "\\" in value:
        value = value.replace("\\", "\\\\")
    if "\t" in value or "\n" in value or "\r" in value:
        value = value.replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    return value
