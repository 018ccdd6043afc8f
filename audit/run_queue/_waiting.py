"""Runs waiting for someone else to move them, as the store records them: paused runs
whose gates are all decided (their resume was handed over, or lost with its
message), and the jobs of the runs a worker is about to execute.

The store is the outbox of a decision's hand-over: the decision and the gate's
decided state are committed before any message is sent, so a resume whose message
never reached a broker (the broker down, the server gone before it published) is
the run still ``paused`` with no pending gate, which :func:`resumes_to_recover`
finds and ``converge.service.recover_runs`` sends again (``converge worker`` at
start, ``converge worker --recover``). A message sent twice is still one resume:
the resume's claim is a compare-and-set.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import exists, select

from audit.store import SqlRunStore
from audit.tables import gates, runs
from engine.status import GateStatus, RunStatus


def resumes_to_recover(store: SqlRunStore) -> list[str]:
    """Run ids of the ``paused`` runs that recorded their job and none of whose gates
    is pending (one decided): their resume is due, handed over or not; oldest
    first. (A run with no job recorded is resumed from Python, by whoever holds its
    suggestors.) Raises ``StoreError``."""
    pending = exists().where(gates.c.run_id == runs.c.run_id, gates.c.status == GateStatus.PENDING)
    decided = exists().where(gates.c.run_id == runs.c.run_id, gates.c.status != GateStatus.PENDING)
    with store.transaction(write=False) as conn:
        rows = conn.execute(
            select(runs.c.run_id)
            .where(
                runs.c.status == RunStatus.PAUSED,
                runs.c.job_spec.is_not(None),
                decided,
                ~pending,
            )
            .order_by(runs.c.started_at)
        ).all()
    return [r.run_id for r in rows]


def waiting_jobs(store: SqlRunStore, limit: int = 20) -> list[dict[str, Any]]:
    """The distinct recorded jobs (``job_spec``, decoded) of the ``queued`` and ``paused``
    runs, most recently started first, at most ``limit`` of them: the jobs a worker
    is likely to execute next. A job spec that is no JSON object is left out.
    Raises ``StoreError``."""
    with store.transaction(write=False) as conn:
        rows = conn.execute(
            select(runs.c.job_spec, runs.c.started_at)
            .where(
                runs.c.status.in_((RunStatus.QUEUED, RunStatus.PAUSED)),
                runs.c.job_spec.is_not(None),
            )
            .order_by(runs.c.started_at.desc())
            .limit(limit * 50)
        ).all()
    found: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row.job_spec in found or len(found) >= limit:
            continue
        try:
            spec = json.loads(row.job_spec)
        except ValueError:
            continue
        if isinstance(spec, dict):
            found[row.job_spec] = spec
    return list(found.values())
