"""What the run pages and the JSON API show and do for forks and diffs (issue 24).

A fork's page names its parent and the cycle it was forked at (the link its chain
holds, :mod:`audit.queries._forks`), a run's page lists its forks, the list of runs marks
each fork; an approver forks a run at a cycle (:func:`converge.timetravel._fork.fork_run`,
as ``converge fork``), anyone signed in reads the diff of two runs
(:mod:`converge.timetravel._diff`, as ``converge diff``). The routes are in
:mod:`converge.web.runs`.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from audit.queries import fork_link, fork_links, forks_of
from audit.store import SqlRunStore
from converge.run_queue import RunQueue
from converge.timetravel import BUDGET_FIELDS, diff_runs, record_fork, snapshot
from converge.web.errors import Unprocessable

__all__ = [
    "PAGE_FACTS",
    "ForkRequest",
    "diff_data",
    "fork_answer",
    "fork_as",
    "fork_data",
    "with_fork_links",
]

PAGE_FACTS = 200
"""Facts listed per section (only in A, only in B, changed) on the diff page; the
JSON API lists them all."""

MAX_CYCLE = 2**31 - 1
"""The largest cycle number a request may name."""


def _integral(value: object) -> object:
    """A number without a fraction is an integer (``3.0`` is ``3``), as JSON Schema says."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


Count = Annotated[int, Field(ge=0), BeforeValidator(_integral)]
"""A count of a JSON body: ``3`` or ``3.0``; never ``true`` nor ``"3"`` (strict), nor < 0."""
CycleNumber = Annotated[int, Field(ge=0, le=MAX_CYCLE), BeforeValidator(_integral)]
"""A cycle number of a JSON body, as :data:`Count` and at most :data:`MAX_CYCLE`."""


class ForkRequest(BaseModel):
    """The body of ``POST /api/runs/{run_id}/fork``: the cycle whose end the fork
    starts from, and budget limits laid over the budget of the job the run
    recorded (totals, as in any run: the cycles and facts taken count; absent:
    the job's). Strict types: ``false`` or ``"3"`` is no number (422). The page's
    form, whose fields are text, is read with ``strict=False``."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={"examples": [{"cycle": 1}, {"cycle": 0, "max_cycles": 5}]},
    )

    cycle: CycleNumber = Field(description="0: right after the initial facts.")
    max_cycles: CycleNumber | None = None
    max_facts: Count | None = None
    max_tokens: Count | None = None
    max_seconds: float | None = Field(default=None, ge=0)
    max_cost_usd: float | None = Field(default=None, ge=0)
    max_invocations: Count | None = None

    def changes(self) -> dict[str, Any]:
        """The budget limits given (None ones left out)."""
        given = {name: getattr(self, name) for name in BUDGET_FIELDS}
        return {k: v for k, v in given.items() if v is not None}


def fork_as(
    store: SqlRunStore,
    run_id: str,
    cycle: int,
    changes: dict[str, Any],
    by: str,
    queue: RunQueue,
) -> str:
    """Record a fork of ``run_id`` at ``cycle`` by ``by`` (whom the access policy
    allowed to: :mod:`converge.web.runs`) and hand it to ``queue`` (the workers, or
    the server's pool of worker processes): the new run's id, at once; the fork runs
    elsewhere, however long its budget lets it. A budget value the job refuses is a
    422 naming it. Raises the library's errors (``RunNotFound``, ``ForkError``,
    ``UnverifiedParent``...) for the caller to answer
    (:func:`converge.web.errors.http_error`)."""
    try:
        new_id = record_fork(store, run_id, cycle, changes=changes, by=by)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "budget"
        raise Unprocessable(f"body.{where}", str(first["msg"])) from exc
    queue.send(new_id, "run")
    return new_id


def fork_answer(fork: str, parent: str, cycle: int) -> dict[str, Any]:
    """The answer to a fork: the new run (``queued``), its link, where to follow it."""
    return {
        "run_id": fork,
        "forked_from": {"run": parent, "cycle": cycle},
        "status": "queued",
        "url": f"/runs/{fork}",
        "api": f"/api/runs/{fork}",
    }


def fork_data(store: SqlRunStore, run_id: str) -> dict[str, Any]:
    """A run page's fork links: ``forked_from`` (``{run, cycle, facts_root}`` or
    None) and ``forks`` (``[{run_id, cycle}]``, oldest first)."""
    link = fork_link(store, run_id)
    return {
        "forked_from": None if link is None else link.to_dict(),
        "forks": [{"run_id": f.fork, "cycle": f.cycle} for f in forks_of(store, run_id)],
    }


def with_fork_links(store: SqlRunStore, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` (``RunRow.to_dict()``) with ``forked_from`` on each: the fork's link,
    None for a run that is no fork (read for the forks only, in one query)."""
    forks = [r["run_id"] for r in rows if r.get("parent_run_id")]
    links = fork_links(store, forks) if forks else {}
    for r in rows:
        if "parent_run_id" in r:  # a row that could be read
            link = links.get(r["run_id"])
            r["forked_from"] = None if link is None else link.to_dict()
    return rows


def diff_data(store: SqlRunStore, run_a: str, run_b: str, *, limit: int | None) -> dict[str, Any]:
    """The diff of two runs (``converge diff --json``'s shape), each fact list cut
    to ``limit`` entries (None: all) with ``counts`` giving their full lengths.
    Raises ``RunNotFound``."""
    diff = diff_runs(snapshot(store, run_a), snapshot(store, run_b))
    data = diff.to_dict()
    facts = data["facts"]
    data["counts"] = {name: len(facts[name]) for name in ("only_a", "only_b", "changed")}
    if limit is not None:
        for name in ("only_a", "only_b", "changed"):
            facts[name] = facts[name][:limit]
    return data
