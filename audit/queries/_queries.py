"""What the audit store answers: recorded runs and events, as frozen values.

:class:`RunRow` is one ``runs`` row with its parsed ``StopReason``;
:class:`StoredEvent` one numbered, chained event; :func:`list_runs`
(:func:`read_runs`: an unreadable row in its place, as :class:`UnreadableRun`),
:func:`get_run` and :func:`read_events` read them (the queries of
:class:`audit.store.SqlRunStore`; its facts: :func:`audit.queries._history.read_facts`);
:func:`resolve_run_id` finds a run by a unique prefix of its id. :func:`parse_since`
reads the ``--since`` of
``converge runs`` (an ISO date/time or a relative age like ``1h``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from sqlalchemy import Connection, Row, Select, select

from audit.cells import bad_cell, json_cell
from audit.core import StoreCore
from audit.queries._pruned import pruned_note
from audit.tables import audit_events, runs
from audit.writing import running_held, with_leases
from engine.effect import Usage
from engine.errors import AmbiguousRunId, CorruptRow, RunNotFound
from engine.status import RunStatus
from engine.stop_categories import STOP_KINDS

if TYPE_CHECKING:  # the models are built where a reason is parsed (run_row)
    from pydantic import ValidationError

    from engine.stop import StopReason

DEFAULT_LIMIT = 100


@dataclass(frozen=True, slots=True)
class RunRow:
    """One recorded run, as ``store.runs()`` and ``store.run()`` return it.

    ``status`` is ``running``, ``paused``, ``stopped`` or ``crashed`` (a ``running``
    run whose lease expired by the database's clock, or whose writer on this host
    is gone); times are unix seconds; the stop fields are None while the run has
    not stopped or paused yet. ``lease_holder`` (``host/pid/start``) and
    ``lease_left_s`` (seconds left, negative once expired, by the database's clock)
    are those of a running run's lease (None without one).
    """

    run_id: str
    job: str | None
    status: str
    started_at: float
    ended_at: float | None
    stop_reason: StopReason | None
    kind: str | None
    category: str | None
    cycles: int
    facts_count: int
    facts_root: str | None
    usage: Usage
    duration_ms: int | None
    suggestors: tuple[str, ...]
    head_hash: str
    last_seq: int
    chain: str
    pid: int | None
    hostname: str | None
    parent_run_id: str | None
    lease_holder: str | None = None
    lease_left_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready dict of the row (``stop_reason`` as its JSON)."""
        return {
            "run_id": self.run_id,
            "job": self.job,
            "status": self.status,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "kind": self.kind,
            "category": self.category,
            "stop_reason": None
            if self.stop_reason is None
            else self.stop_reason.model_dump(mode="json"),
            "cycles": self.cycles,
            "facts_count": self.facts_count,
            "facts_root": self.facts_root,
            "usage": {
                "input_tokens": self.usage.input_tokens,
                "output_tokens": self.usage.output_tokens,
                "cost_usd": self.usage.cost_usd,
            },
            "duration_ms": self.duration_ms,
            "suggestors": list(self.suggestors),
            "head_hash": self.head_hash,
            "last_seq": self.last_seq,
            "chain": self.chain,
            "pid": self.pid,
            "hostname": self.hostname,
            "parent_run_id": self.parent_run_id,
            "lease_holder": self.lease_holder,
            "lease_left_s": self.lease_left_s,
        }


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """One audit event as stored: ``seq`` (from 1), ``ts`` (unix seconds), ``hash`` (hex)."""

    run_id: str
    seq: int
    kind: str
    cycle: int
    ts: float
    payload: dict[str, Any]
    hash: str

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready dict of the event."""
        return {
            "run_id": self.run_id,
            "seq": self.seq,
            "kind": self.kind,
            "cycle": self.cycle,
            "ts": self.ts,
            "payload": self.payload,
            "hash": self.hash,
        }


def run_row(r: Row[Any], *, reasons: bool = True) -> RunRow:
    """A :class:`RunRow` from a ``runs`` row (the JSON columns parsed).

    Raises ``CorruptRow`` naming the first cell it cannot read: not of its
    column's type, a ``reason`` that is no stop reason, a ``usage`` that is no
    ``{input_tokens, output_tokens, cost_usd}`` object, ``suggestors`` no list.
    ``reasons=False``: the ``reason`` is only checked to be a JSON object of a
    known ``kind`` (:data:`engine.stop_categories.STOP_KINDS`) and not parsed
    (``stop_reason`` None; ``kind`` and ``category`` are the row's): no stop model
    is built, for a listing that prints only those.
    """
    m = r._mapping
    where = f"run {m['run_id']}"
    bad = bad_cell(runs, m)
    if bad is not None:
        raise CorruptRow("runs", where, *bad)
    status = m["status"]
    holder, expires, now = m.get("lease_holder"), m.get("lease_expires"), m.get("db_now")
    if holder is not None and not isinstance(holder, str):
        raise CorruptRow("run_leases", where, "holder", "not a text")
    if expires is not None and (isinstance(expires, bool) or not isinstance(expires, int | float)):
        raise CorruptRow("run_leases", where, "expires_at", "not a number")
    if status == RunStatus.RUNNING and not running_held(
        m["pid"], m["hostname"], holder, expires, now
    ):
        status = RunStatus.CRASHED
    left = None if expires is None or now is None else round(float(expires) - float(now), 3)
    if left is None or status not in (RunStatus.RUNNING, RunStatus.CRASHED):
        holder = left = None
    reason = None
    if m["reason"]:
        data, why = json_cell(m["reason"], dict)
        if why is not None:
            raise CorruptRow("runs", where, "reason", why)
        if reasons:
            reason = _parsed_reason(data, where)
        elif data.get("kind") not in STOP_KINDS:
            raise CorruptRow(
                "runs", where, "reason", f"not a stop reason (kind {data.get('kind')!r})"
            )
    u, why = json_cell(m["usage"], dict) if m["usage"] else ({}, None)
    if why is not None:
        raise CorruptRow("runs", where, "usage", why)
    try:
        usage = Usage(
            int(u.get("input_tokens", 0)),
            int(u.get("output_tokens", 0)),
            float(u.get("cost_usd", 0.0)),
        )
    except (TypeError, ValueError) as exc:
        raise CorruptRow("runs", where, "usage", f"not a usage ({exc})") from exc
    suggestors, why = json_cell(m["suggestors"], list)
    if why is not None:
        raise CorruptRow("runs", where, "suggestors", why)
    return RunRow(
        run_id=m["run_id"],
        job=m["job"],
        status=status,
        started_at=m["started_at"],
        ended_at=m["ended_at"],
        stop_reason=reason,
        kind=m["stop_kind"],
        category=m["category"],
        cycles=m["cycles"],
        facts_count=m["facts_count"],
        facts_root=m["facts_root"],
        usage=usage,
        duration_ms=m["duration_ms"],
        suggestors=tuple(str(s) for s in suggestors),
        head_hash=m["head_hash"],
        last_seq=m["last_seq"],
        chain=m["chain"],
        pid=m["pid"],
        hostname=m["hostname"],
        parent_run_id=m["parent_run_id"],
        lease_holder=holder,
        lease_left_s=left if holder is not None else None,
    )


class RunFilter(TypedDict, total=False):
    """Which runs a listing keeps, newest first (a key left out, or None: any): stop
    ``category`` and ``kind``, ``job``, ``status`` (``crashed`` included), start time
    ``since`` (unix seconds); ``limit`` bounds the rows read (default 100; None or 0:
    all)."""

    category: str | None
    kind: str | None
    since: float | None
    job: str | None
    status: str | None
    limit: int | None


def runs_query(*, postgres: bool | None = None, **filters: Unpack[RunFilter]) -> Select[Any]:
    """The ``SELECT`` over ``runs``, newest first; each filter is served by an index.
    With ``postgres`` (the dialect, True or False), each run's lease too
    (:func:`audit.writing._lease.with_leases`). ``TypeError`` for a key that is no
    filter.

    ``status="crashed"`` selects ``running`` rows (the caller keeps the dead ones).
    """
    unknown = sorted(filters.keys() - RunFilter.__optional_keys__)
    if unknown:
        raise TypeError(f"unexpected keyword argument {unknown[0]!r} (not a run filter)")
    category, kind, job = filters.get("category"), filters.get("kind"), filters.get("job")
    status, since = filters.get("status"), filters.get("since")
    limit = filters.get("limit", DEFAULT_LIMIT)
    q = select(runs) if postgres is None else with_leases(select(runs), postgres)
    if category is not None:
        q = q.where(runs.c.category == category)
    if kind is not None:
        q = q.where(runs.c.stop_kind == kind)
    if job is not None:
        q = q.where(runs.c.job == job)
    if status is not None:
        q = q.where(runs.c.status == (RunStatus.RUNNING if status == RunStatus.CRASHED else status))
    if since is not None:
        q = q.where(runs.c.started_at >= since)
    q = q.order_by(runs.c.started_at.desc(), runs.c.run_id.desc())
    if limit is not None and limit > 0:
        q = q.limit(limit)
    return q


@dataclass(frozen=True, slots=True)
class UnreadableRun:
    """A ``runs`` row :func:`read_runs` could not read: ``error`` names the cell."""

    run_id: str
    error: CorruptRow

    def to_dict(self) -> dict[str, Any]:
        """``{"run_id", "error", "column"}``: how a list of runs marks this one."""
        return {"run_id": self.run_id, "error": str(self.error), "column": self.error.column}


def read_runs(
    store: StoreCore, *, reasons: bool = True, **filters: Unpack[RunFilter]
) -> list[RunRow | UnreadableRun]:
    """Recorded runs, newest first, filtered as :func:`list_runs`; a row that
    cannot be read is an :class:`UnreadableRun` in its place, so one corrupt row
    never hides the others. ``reasons=False``: stop reasons checked, not parsed
    (:func:`run_row`), for a listing of kinds and categories."""
    status, limit = filters.get("status"), filters.get("limit", DEFAULT_LIMIT)
    # whether the writer lives is not a column
    live = status in (RunStatus.CRASHED, RunStatus.RUNNING)
    read = filters.copy()
    read["limit"] = None if live else limit
    q = runs_query(postgres=store.is_postgres, **read)
    out: list[RunRow | UnreadableRun] = []
    with store.transaction(write=False) as conn:
        for r in conn.execute(q):
            try:
                out.append(run_row(r, reasons=reasons))
            except CorruptRow as exc:
                out.append(UnreadableRun(str(r._mapping["run_id"]), exc))
    if live:
        out = [r for r in out if isinstance(r, UnreadableRun) or r.status == status]
        if limit:
            out = out[:limit]
    return out


def list_runs(store: StoreCore, **filters: Unpack[RunFilter]) -> list[RunRow]:
    """Recorded runs, newest first, filtered by :class:`RunFilter` (stop
    ``category``/``kind``, ``job``, ``status`` (``crashed`` included), start time
    ``since`` (unix seconds); ``limit``, default 100, None or 0 = all, bounds the rows
    read). ``CorruptRow`` for the first row that cannot be read (:func:`read_runs`
    lists the others)."""
    rows: list[RunRow] = []
    for r in read_runs(store, **filters):
        if isinstance(r, UnreadableRun):
            raise r.error
        rows.append(r)
    return rows


def get_run(store: StoreCore, run_id: str) -> RunRow:
    """One recorded run (raises ``RunNotFound``)."""
    with store.transaction(write=False, single=True) as conn:
        return run_in(store, conn, run_id)


def run_in(store: StoreCore, conn: Connection, run_id: str) -> RunRow:
    """:func:`get_run` read on ``conn`` (a transaction the caller holds)."""
    row = conn.execute(
        with_leases(select(runs), store.is_postgres).where(runs.c.run_id == run_id)
    ).one_or_none()
    if row is None:
        raise RunNotFound(f"no run {run_id!r} in audit store {store.shown}")
    return run_row(row)


CANDIDATES = 10
"""How many run ids an ambiguous prefix's error lists at most."""


def resolve_run_id(store: StoreCore, text: str) -> str:
    """The id of the run ``text`` names: ``text`` itself when a run has that id,
    else the one run whose id starts with it (case-sensitive, as ids are).

    Raises ``RunNotFound`` ("no run 'x' in audit store ...") when none does, and
    :class:`AmbiguousRunId` listing the candidates when several do.
    """
    text = text.strip()
    with store.transaction(write=False) as conn:
        exact = conn.execute(select(runs.c.run_id).where(runs.c.run_id == text)).scalar()
        if exact is not None:
            return str(exact)
        if not text:
            raise RunNotFound(f"no run {text!r} in audit store {store.shown}")
        # LIKE 'text%' (its % and _ escaped); SQLite's LIKE ignores case, so the
        # matches are checked again here
        q = (
            select(runs.c.run_id)
            .where(runs.c.run_id.startswith(text, autoescape=True))
            .order_by(runs.c.run_id)
            .limit(CANDIDATES * 4)
        )
        found = [str(r) for r in conn.execute(q).scalars() if str(r).startswith(text)]
    if len(found) == 1:
        return found[0]
    if not found:
        note = pruned_note(store, text)
        if note is not None:  # its tombstone: `converge verify --all` checks it
            raise RunNotFound(
                f"run {text!r} was {note}: its events, facts and checkpoints are no "
                f"longer in audit store {store.shown}"
            )
        raise RunNotFound(f"no run {text!r} in audit store {store.shown}")
    shown = found[:CANDIDATES]
    more = ", ..." if len(found) > len(shown) else ""
    raise AmbiguousRunId(
        f"run id {text!r} is ambiguous: {', '.join(shown)}{more} (type more of the id)", shown
    )


def read_events(
    store: StoreCore,
    run_id: str,
    kinds: Sequence[str] | None = None,
    *,
    after: int = 0,
    limit: int | None = None,
) -> list[StoredEvent]:
    """The run's events in ``seq`` order (only ``kinds`` when given; only those after
    seq ``after``, at most ``limit``)."""
    with store.transaction(write=False, single=True) as conn:
        return events_in(conn, run_id, kinds, after=after, limit=limit)


def events_in(
    conn: Connection,
    run_id: str,
    kinds: Sequence[str] | None = None,
    *,
    after: int = 0,
    limit: int | None = None,
) -> list[StoredEvent]:
    """:func:`read_events` read on ``conn`` (a transaction the caller holds)."""
    q = select(audit_events).where(audit_events.c.run_id == run_id)
    if after:
        q = q.where(audit_events.c.seq > after)
    if kinds is not None:
        q = q.where(audit_events.c.kind.in_(list(kinds)))
    q = q.order_by(audit_events.c.seq)
    if limit is not None:
        q = q.limit(limit)
    return [_stored_event(r) for r in conn.execute(q)]


def _stored_event(r: Row[Any]) -> StoredEvent:
    """A :class:`StoredEvent` from an ``audit_events`` row (``CorruptRow`` when a
    cell is not of its type or the payload is no JSON object)."""
    m = r._mapping
    bad = bad_cell(audit_events, m)
    if bad is not None:
        raise CorruptRow("audit_events", f"run {m['run_id']} event {m['seq']}", *bad)
    payload, why = json_cell(m["payload"], dict)
    if why is not None:
        raise CorruptRow("audit_events", f"run {m['run_id']} event {m['seq']}", "payload", why)
    return StoredEvent(r.run_id, r.seq, r.kind, r.cycle, r.ts, payload, r.hash)


def _parsed_reason(data: dict[str, Any], where: str) -> StopReason:
    """The stop reason of a ``reason`` cell's JSON object (``CorruptRow`` when it is none)."""
    from pydantic import ValidationError

    from engine.stop import parse_stop_reason

    try:
        return parse_stop_reason(data)
    except ValidationError as exc:
        raise CorruptRow("runs", where, "reason", _invalid(exc)) from exc


def _invalid(exc: ValidationError) -> str:
    """Why a JSON value is no stop reason, in one line (pydantic's first error)."""
    first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": str(exc)}
    where = ".".join(str(part) for part in first["loc"])
    return f"not a stop reason ({where + ': ' if where else ''}{first['msg']})"


_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)\s*$", re.IGNORECASE)
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_since(text: str, *, now: float | None = None) -> float:
    """Unix seconds from an ISO date/time (naive = UTC) or an age (``30m``, ``1h``, ``7d``).

    Raises ``ValueError`` naming the accepted forms.
    """
    m = _AGE.match(text)
    if m:
        return (time.time() if now is None else now) - float(m.group(1)) * _UNIT_S[
            m.group(2).lower()
        ]
    try:
        dt = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"--since {text!r}: expected an ISO date/time (2025-01-31, 2025-01-31T12:00) "
            "or an age like 30m, 1h, 7d"
        ) from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()
