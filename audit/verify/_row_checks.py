"""The stored rows, column by column, against the run's chain (docs/audit.md,
"What verify compares").

:mod:`audit.verify._crosscheck` checks a run's stop and its gates' decisions; this module
checks the rest of what a command shows or a resume reads:

- the header a run was started with (``job``, ``job_spec``, ``suggestors``,
  ``started_at``, ``parent_run_id``), which :func:`audit.trail._runs.start_run` chains as
  the ``header`` of the run's ``run_started`` event (:func:`header_record`);
  a run started before that chains only its ``job`` and ``suggestors``;
- the outcome columns the stop events carry besides the stop (``usage``,
  ``ended_at``, ``duration_ms``), where the run's events carry them;
- ``status`` against the run's last start, resume, pause or stop;
- the gate columns ``gate_opened`` carries (``cycle``, ``opened_at``,
  ``expires_at``, ``on_timeout``, ``extra``), and a gate row for every gate opened;
- each event's ``fact_id`` (the unique index's column) against its payload;
- every cell against its column's type (:func:`audit.cells.bad_cell`).

Each check returns ``(seq, why)`` naming the column, or None; none raises,
whatever a cell holds (:func:`read_events` reads the events with their ``fact_id``
cells). ``runs.pid``, ``hostname`` and ``epoch`` are not compared: they are the
live writer and the fencing counter, changed by claims that write no event.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, select

from audit.cells import bad_cell, json_cell, loads, of_type, same_cell, same_json
from audit.tables import audit_events, gates, runs
from audit.trail import CHAIN_COLUMNS, REQUEUED, TERMINAL, ChainRow, header_column
from audit.verify._crosscheck import Problem
from engine.hashing.chain import KEYED, PLAIN
from engine.hashing.commitment import chain_parts
from engine.status import GateStatus, RunStatus

__all__ = [
    "EventCells",
    "check_fact_ids",
    "check_gate_columns",
    "check_header",
    "check_outcome_columns",
    "check_status",
    "read_events",
    "unreadable",
]

_MARKERS = frozenset({"run_started", "run_resumed", REQUEUED, *TERMINAL})
_GATE_OPENED = frozenset(
    {"gate_id", "proposal_id", "proposal", "suggestor", "summary", "policy"}
    | {"opened_at", "expires_at", "on_timeout"}
)
_quote = json.encoder.encode_basestring


def _payload(row: ChainRow) -> dict[str, Any] | None:
    """A chained event's payload as a dict (None when it is not one)."""
    value, why = json_cell(row.payload, dict)
    return None if why is not None else value


def _differs(seq: int, column: str) -> Problem:
    return seq, f"runs row differs from the chain ({column})"


def check_header(run: Any, rows: Sequence[ChainRow]) -> Problem:
    """The row's header columns against its ``run_started`` (seq 1)."""
    if not rows or rows[0].kind != "run_started":
        return None  # no run_started: the chain checks say what is missing
    started = _payload(rows[0])
    if started is None:
        return rows[0].seq, "run_started is not a JSON object"
    column = header_column(run, started)
    return None if column is None else _differs(rows[0].seq, column)


def check_outcome_columns(run: Any, rows: Sequence[ChainRow]) -> Problem:
    """``usage``, ``ended_at`` and ``duration_ms`` against the last stop or pause
    (compared where it carries them: a run recorded before carries usage only)."""
    for row in reversed(rows):
        if row.kind in TERMINAL:
            p = _payload(row)
            if p is None:
                return row.seq, f"{row.kind} is not a JSON object"
            break
    else:
        return None  # no stop yet: crosscheck.check_outcome wants the columns empty
    if "usage" in p:
        u = p["usage"]
        spent = (
            {"input_tokens": u[0], "output_tokens": u[1], "cost_usd": u[2]}
            if isinstance(u, list) and len(u) == 3
            else u
        )
        if not same_json(run.usage, spent):
            return _differs(row.seq, "usage")
    for column in ("ended_at", "duration_ms"):
        if column in p and not same_cell(column, getattr(run, column), p[column]):
            return _differs(row.seq, column)
    return None


def check_status(run: Any, rows: Sequence[ChainRow]) -> Problem:
    """``chain`` (a chain function there is), then ``status`` against the last
    start, resume, pause or stop: ``stopped`` after
    a stop, ``paused`` after a pause, ``running`` after a start or a resume (or
    after a pause whose gate was decided since: the decider claimed the run),
    ``queued`` after a start (a fork recorded for a worker, not claimed yet) or
    after a ``run_requeued`` (a stopped run put back in the queue)."""
    last: str | None = None
    decided = False
    for row in rows:
        if row.kind in _MARKERS:
            last, decided = row.kind, False
        elif row.kind == "gate_decided":
            decided = True
    status = run.status
    if chain_parts(run.chain)[0] not in (PLAIN, KEYED):  # the chain function it hashed with
        return _differs(run.last_seq or 1, "chain")
    if last == "run_stopped":
        ok = status == RunStatus.STOPPED
    elif last == REQUEUED:  # put back in the queue after its stop, not claimed yet
        ok = status == RunStatus.QUEUED
    elif last == "run_paused":
        ok = status == RunStatus.PAUSED or (status == RunStatus.RUNNING and decided)
    else:  # queued after its start only: a fork recorded for a worker
        queued = last == "run_started" and run.parent_run_id is not None
        ok = status == RunStatus.RUNNING or (status == RunStatus.QUEUED and queued)
    return None if ok else _differs(run.last_seq or 1, "status")


def check_gate_columns(gate_rows: Sequence[Any], rows: Sequence[ChainRow]) -> Problem:
    """The gate columns ``gate_opened`` carries besides those
    :func:`audit.verify._crosscheck.check_gates` compares, and a row for every gate the
    chain opened (a deleted gate row, or one moved to another run)."""
    opened: dict[Any, tuple[ChainRow, dict[str, Any]]] = {}
    for row in rows:
        if row.kind == "gate_opened":
            p = _payload(row)
            if p is None:
                return row.seq, "gate_opened is not a JSON object"
            opened[p.get("gate_id")] = (row, p)
    for g in gate_rows:
        found = opened.pop(g.gate_id, None)
        if found is None:
            continue  # crosscheck.check_gates: never opened in the chain
        row, p = found
        expected: dict[str, Any] = {"cycle": row.cycle}
        if g.status == GateStatus.PENDING:  # undecided: no decision in the row either
            expected.update(decided_by=None, decided_at=None, reason=None)
        expected.update((c, p[c]) for c in ("opened_at", "expires_at", "on_timeout") if c in p)
        expected["extra"] = {k: v for k, v in p.items() if k not in _GATE_OPENED}
        for column, value in expected.items():
            if not same_cell(column, getattr(g, column), value):
                return row.seq, f"gate {g.gate_id} differs from the chain ({column})"
    for gate_id, (row, _p) in opened.items():
        return row.seq, f"gate {gate_id} missing (opened in the chain, no gate row)"
    return None


def check_fact_ids(fact_ids: Sequence[tuple[ChainRow, Any]]) -> Problem:
    """Each event's ``fact_id`` (the cell the unique index reads) against its
    payload: the JSON-quoted id of a ``fact_promoted`` fact, NULL otherwise."""
    for row, cell in fact_ids:
        if row.kind != "fact_promoted":
            if cell is not None:
                return row.seq, f"event {row.seq} differs from the chain (fact_id)"
            continue
        try:
            fact = loads(row.payload)
            fact_id = fact.get("id")
        except (ValueError, AttributeError):
            return row.seq, "fact_promoted is not a JSON object"
        if "redacted" in fact and fact_id is None:
            continue  # a redacted fact keeps its id in this cell only (docs/audit.md)
        if not isinstance(fact_id, str) or cell != _quote(fact_id):
            return row.seq, f"event {row.seq} differs from the chain (fact_id)"
    return None


@dataclass(frozen=True, slots=True)
class EventCells:
    """A run's events as ``verify`` reads them: the chained ``rows`` in ``seq``
    order, each one's ``fact_id`` cell, and ``bad``, the first cell that is not of
    its column's type (checked on SQLite only: PostgreSQL enforces the types)."""

    rows: list[ChainRow]
    fact_ids: list[tuple[ChainRow, Any]]
    bad: Problem


def read_events(conn: Connection, run_id: str, *, typed: bool) -> EventCells:
    """The run's events, their ``fact_id`` cells and (unless ``typed``: the
    database enforces the types) the first cell of a wrong type."""
    query = (
        select(*CHAIN_COLUMNS, audit_events.c.fact_id)
        .where(audit_events.c.run_id == run_id)
        .order_by(audit_events.c.seq)
    )
    rows: list[ChainRow] = []
    fact_ids: list[tuple[ChainRow, Any]] = []
    bad: Problem = None
    for r in conn.execute(query):
        row = ChainRow(r[0], r[1], r[2], r[3], r[4], r[5])
        rows.append(row)
        fact_ids.append((row, r[6]))
        if bad is None and not typed:
            cell = bad_cell(audit_events, r._mapping)
            if cell is not None:
                at = r[0] if of_type(r[0], (int,)) else len(rows)
                bad = at, f"audit_events.{cell[0]} of event {at}: {cell[1]}"
    return EventCells(rows, fact_ids, bad)


def unreadable(run: Any, gate_rows: Sequence[Any]) -> Problem:
    """The first cell of the run's ``runs`` row or gate rows that is not of its
    column's type, as ``(seq, why)`` naming table and column."""
    bad = bad_cell(runs, run._mapping)
    if bad is not None:
        last = run._mapping.get("last_seq")
        return (last if of_type(last, (int,)) and last > 0 else 1), f"runs.{bad[0]}: {bad[1]}"
    for g in gate_rows:
        bad = bad_cell(gates, g._mapping)
        if bad is not None:
            return 1, f"gates.{bad[0]} of gate {g._mapping.get('gate_id')}: {bad[1]}"
    return None
