"""The jobs and stores of the trust-boundary tests (issue 29).

:func:`recorded` fills a store with three runs of job files made here, through
the job API as ``converge run`` does (so each run records its job spec):

- ``paused``: the gated job, paused at its two-person license gate, whose
  ``validate_value`` hook refuses AGPL licenses and whose invariant forbids them;
- ``done``: the gated job, approved by two people and run to its end;
- ``plain``: a job without gates, converged.

Job files reference this module's suggestors, hook and invariant as
``tests.boundaryfixtures:NAME``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import text

from audit.store import SqlRunStore
from converge.jobs import Job, load_job
from criteria import invariant
from engine import Context, GateDecision, HitlGatePending, Proposal, suggestor
from tests.storecopies import sql_engine

__all__ = ["GATED", "PLAIN", "Recorded", "edit_spec", "license_value", "recorded", "sql"]

PACKAGES = ({"name": "left-pad"}, {"name": "right-pad"})


@suggestor(name="scan", dependencies=["seed"])
def scan(ctx: Context) -> list[Proposal]:
    """Cycle 1: two packages."""
    return [Proposal("package", dict(p)) for p in PACKAGES]


@suggestor(name="classify", dependencies=["package"])
def classify(ctx: Context) -> list[Proposal]:
    """Cycle 2: left-pad's license is unknown (the gate), right-pad's is MIT."""
    return [
        Proposal("license.unknown", dict(PACKAGES[0])),
        Proposal("license", {**PACKAGES[1], "spdx": "MIT"}),
    ]


def license_value(value: Any, content: Any) -> dict[str, Any]:
    """The gate's ``validate_value`` hook: a license id, never an AGPL one."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError("a license is a non-empty SPDX id")
    if value.upper().startswith("AGPL"):
        raise ValueError(f"{value} is not allowed in this product")
    return {**content, "spdx": value.strip()}


@invariant(name="no_agpl")
def no_agpl(ctx: Context) -> str | None:
    """No fact holds an AGPL license."""
    for fact in ctx:
        spdx = fact.content.get("spdx") if isinstance(fact.content, dict) else None
        if isinstance(spdx, str) and spdx.upper().startswith("AGPL"):
            return f"{fact.id} is {spdx}"
    return None


GATED = {
    "name": "trust-gated",
    "suggestors": ["tests.boundaryfixtures:scan", "tests.boundaryfixtures:classify"],
    "budget": {"max_cycles": 10},
    "invariants": ["tests.boundaryfixtures:no_agpl"],
    "gates": [
        {
            "hitl": {
                "keys": ["license.unknown"],
                "summary": "Classify {content[name]}",
                "approvals_required": 2,
                "validate_value": "tests.boundaryfixtures:license_value",
            }
        }
    ],
    "initial": {"seed": [1]},
}
"""The gated job: two approvals, a value hook and an invariant, all refusing AGPL."""

PLAIN = {
    "name": "trust-plain",
    "suggestors": ["tests.boundaryfixtures:scan"],
    "budget": {"max_cycles": 5},
    "initial": {"seed": [1]},
}
"""A job without gates: it converges in one cycle."""


@dataclass(frozen=True)
class Recorded:
    """A store holding the runs ``paused``, ``done`` and ``plain``."""

    store: SqlRunStore
    url: str
    gated: Path
    gate: str  # the paused run's gate

    def job(self) -> Job:
        """The gated job, loaded from its file."""
        return load_job(self.gated)


def _write(path: Path, spec: dict[str, Any]) -> Path:
    path.write_text(json.dumps(spec))  # JSON is YAML
    return path


def recorded(store: SqlRunStore, url: str, workdir: Path) -> Recorded:
    """Record the three runs on ``store`` (at ``url``); every one verifies."""
    gated = load_job(_write(workdir / "gated.yaml", GATED))
    plain = load_job(_write(workdir / "plain.yaml", PLAIN))
    first = gated.build_engine(store).run(gated.spec.initial, run_id="done")
    assert isinstance(first.stop_reason, HitlGatePending), first.stop_reason
    # two approvals by two people: the second decides the gate, the run goes on
    from converge.decisions import decide

    gate = first.stop_reason.gate_id
    decide(store, gate, GateDecision.approve(by="alice", value="MIT"))
    decide(store, gate, GateDecision.approve(by="bob", value="MIT"))
    assert store.run("done").status == "stopped", store.run("done")
    second = gated.build_engine(store).run(gated.spec.initial, run_id="paused")
    assert isinstance(second.stop_reason, HitlGatePending), second.stop_reason
    assert plain.build_engine(store).run(plain.spec.initial, run_id="plain").stop_reason
    reports = store.verify_all()
    assert all(r.ok for r in reports), reports
    return Recorded(store, url, workdir / "gated.yaml", second.stop_reason.gate_id)


def sql(url: str, statement: str, **params: Any) -> Any:
    """Run one SQL statement on the store at ``url`` as an outsider (its own
    connection, committed); the rows of a SELECT."""
    engine = sql_engine(url)
    try:
        with engine.begin() as conn:
            result = conn.execute(text(statement), params)
            return result.all() if result.returns_rows else None
    finally:
        engine.dispose()


def edit_spec(url: str, run_id: str, edit: Any) -> None:
    """Rewrite ``runs.job_spec`` of ``run_id`` with ``edit(spec)`` (the recorded
    job's ``spec`` dict, changed in place), as a database writer could."""
    [(text_,)] = sql(url, "SELECT job_spec FROM runs WHERE run_id = :r", r=run_id)
    record = json.loads(text_)
    edit(record["spec"])
    sql(
        url,
        "UPDATE runs SET job_spec = :s WHERE run_id = :r",
        s=json.dumps(record, separators=(",", ":")),
        r=run_id,
    )
