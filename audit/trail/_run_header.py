"""A run's header (job, job spec, suggestors, start time, parent): chained when the
run starts, checked against the chain whenever it is read back.

The job spec is what a resume rebuilds its engine from (suggestors, gates and
their quorum and value hooks, invariants, criteria), so it must be what the run
started with: :func:`with_header` puts the header columns of the ``runs`` row, as
written, in the run's ``run_started`` event (its ``header``), and
:func:`read_header` refuses a row that differs from it (``TamperedRow``) or cannot
be read (``CorruptRow``), before anything is decided or written. The header never
changes after the start: every resume (``converge approve`` / ``reject`` /
``resume``, the inbox, workers, deadlines) rebuilds its engine from this checked
record. A run started before headers were chained is checked on the ``job`` and
``suggestors`` its ``run_started`` always held (its spec is not chained: ``verify``
cannot vouch for it, and says nothing about it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, select

from audit.cells import bad_cell, json_cell, same_cell
from audit.core import StoreCore
from audit.tables import audit_events, runs
from audit.trail._chain import CHAIN_COLUMNS
from engine.errors import CorruptRow, RunNotFound, TamperedRow
from engine.hashing.chain import GENESIS, KEYED, PLAIN, event_message
from engine.hashing.commitment import chain_parts, chained_payload
from engine.hashing.ledger import key_fingerprint
from engine.store import AuditEvent, BatchItem, RunHeader

__all__ = ["HEADER_COLUMNS", "header_column", "header_record", "read_header", "with_header"]


HEADER_COLUMNS = ("job", "job_spec", "suggestors", "started_at", "parent_run_id")
"""The ``runs`` columns a run's ``run_started`` chains as its ``header``."""


def header_record(header: RunHeader, started_at: float) -> dict[str, Any]:
    """The ``header`` a run's ``run_started`` chains: the header columns of its
    ``runs`` row as written (``started_at``: the row's, a queued run's submit time)."""
    return {
        "job": header.job,
        "job_spec": header.job_spec,
        "suggestors": list(header.suggestors),
        "started_at": started_at,
        "parent_run_id": header.parent_run_id,
    }


def header_column(run: Any, started: Mapping[str, Any]) -> str | None:
    """The first header column of ``run`` (a ``runs`` row) that differs from the
    ``run_started`` payload ``started``; None when all agree. A run started before
    headers were chained is checked on the ``job`` and ``suggestors`` it recorded."""
    header = started.get("header")
    if isinstance(header, dict):
        expected = {c: header.get(c) for c in HEADER_COLUMNS}
    else:
        expected = {c: started[c] for c in ("job", "suggestors") if c in started}
    for column, value in expected.items():
        if not same_cell(column, getattr(run, column, None), value):
            return column
    return None


def with_header(
    events: Sequence[BatchItem], header: RunHeader, started_at: float
) -> Sequence[BatchItem]:
    """``events`` with the run's ``run_started`` (the first event) carrying the
    row's header (:func:`header_record`) as ``header``."""
    first = events[0] if events else None
    if not isinstance(first, AuditEvent) or first.kind != "run_started":
        return events
    payload = {**first.payload, "header": header_record(header, started_at)}
    started = AuditEvent(first.kind, first.cycle, payload, first.ts, fact_texts=first.fact_texts)
    return [started, *events[1:]]


def _hash_checkable(store: StoreCore, chain: str) -> bool:
    """True when this store object can recompute the run's chain: the run was
    chained as the store chains now, and a keyed store's key is the right one."""
    kind = chain_parts(chain)[0]
    if kind != store.chain_kind or kind not in (PLAIN, KEYED):
        return False
    key = store.key
    return key is None or store.known_fingerprint in (None, key_fingerprint(key))


def read_header(store: StoreCore, conn: Connection, run_id: str) -> RunHeader:
    """The header run ``run_id`` was started with, once its ``runs`` row agrees
    with the ``header`` its ``run_started`` chained (and that event with its hash).

    Raises ``RunNotFound``, ``CorruptRow`` (a header cell that cannot be read) or
    ``TamperedRow`` naming the run and the column that differs.
    """
    row = conn.execute(select(runs).where(runs.c.run_id == run_id)).one_or_none()
    if row is None:
        raise RunNotFound(f"no run {run_id!r} in audit store {store.shown}")
    m = row._mapping
    where = f"run {run_id}"
    bad = bad_cell(runs, {c: m[c] for c in (*HEADER_COLUMNS, "chain", "last_seq")})
    if bad is not None:
        raise CorruptRow("runs", where, *bad)
    spec, why = (None, None) if m["job_spec"] is None else json_cell(m["job_spec"], dict)
    if why is not None:
        raise CorruptRow("runs", where, "job_spec", why)
    suggestors, why = json_cell(m["suggestors"], list)
    if why is not None or not all(isinstance(s, str) for s in suggestors):
        raise CorruptRow("runs", where, "suggestors", why or "not a list of names")
    started = conn.execute(
        select(*CHAIN_COLUMNS).where(audit_events.c.run_id == run_id, audit_events.c.seq == 1)
    ).one_or_none()
    if started is None:
        if m["last_seq"]:
            raise TamperedRow(run_id, "run_started", "the run's first event is missing")
        # queued, or taken and not started yet: nothing chained so far
    else:
        _check_started(store, run_id, row, started._mapping)
    return RunHeader(
        run_id=run_id,
        job=m["job"],
        job_spec=spec,
        suggestors=tuple(suggestors),
        started_at=m["started_at"],
        parent_run_id=m["parent_run_id"],
    )


def _check_started(store: StoreCore, run_id: str, row: Any, ev: Any) -> None:
    """``TamperedRow`` unless ``ev`` is a ``run_started`` whose hash verifies (when
    this store can recompute it) and whose header equals ``row``'s."""
    bad = bad_cell(audit_events, ev)
    if bad is not None:
        raise CorruptRow("audit_events", f"run {run_id} event 1", *bad)
    if ev["kind"] != "run_started":
        raise TamperedRow(run_id, "run_started", f"event 1 is a {ev['kind']}")
    if _hash_checkable(store, row.chain):
        message = event_message(
            json.encoder.encode_basestring(run_id),
            1,
            ev["kind"],
            ev["cycle"],
            ev["ts"],
            chained_payload("run_started", ev["payload"])
            if chain_parts(row.chain)[1]
            else ev["payload"],
        )
        if store.chain_hash(GENESIS, message) != ev["hash"]:
            raise TamperedRow(run_id, "run_started", "its hash does not verify")
    payload, why = json_cell(ev["payload"], dict)
    if why is not None:
        raise TamperedRow(run_id, "run_started", why)
    column = header_column(row, payload)
    if column is not None:
        raise TamperedRow(run_id, f"runs.{column}", "not the one its run_started chained")
