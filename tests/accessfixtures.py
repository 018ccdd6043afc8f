"""A store with people of every role and runs of every kind the access matrix needs
(tests/test_access_matrix.py), and a client of the real ``converge serve`` for one
person through the API or the pages.

People: ``ada`` (admin), ``rita`` (runner), ``alice`` (approver), ``victor``
(viewer), ``lena`` (approver in group ``legal``) and ``oscar`` (approver, not in
it). Runs (:class:`Scene`): ``open`` paused at a quorum gate nobody can fill (so
every allowed vote is a vote and the gate stays pending), one such run per
surface for the decisions, ``stopped`` (converged: to fork, follow and export),
``queued`` (a run left to a worker, which holds it running until released: to
cancel), ``hidden`` (its job shows its runs to ``legal`` only) and
``restricted`` (its gate's approvers are ``legal``, its summary names
:data:`SECRET`).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import text

from audit import open_store
from audit.people import add_to_groups, add_token
from audit.run_queue import queue_run
from audit.store import SqlRunStore
from converge.jobs import load_job
from engine import Context, Proposal, RunHeader, new_run_id, suggestor
from tests.servicefixtures import write_job

SECRET = "acme-corp-merger"
"""A word only the restricted gate's proposal (and so its summary) holds: who may not
read the gate never sees it."""
ROLES = {"ada": "admin", "rita": "runner", "alice": "approver", "victor": "viewer"}
"""The person of each role in the role matrix."""
SUGGESTORS = [f"tests.hitlfixtures:{s}" for s in ("scan", "count", "finish")]


@suggestor(name="scan", dependencies=["seed"])
def secret_scan(ctx: Context) -> list[Proposal]:
    """As ``tests.hitlfixtures:scan``, the package of unknown license named :data:`SECRET`."""
    return [Proposal("package", "a"), Proposal("license.unknown", {"name": SECRET})]


@suggestor(name="blocked", dependencies=["hold"])
def blocked(ctx: Context) -> list[Proposal]:
    """Marks its start (the seed's ``started`` file), then waits for its ``until`` file
    (at most 300 s): a run that stays running, to cancel as often as the test likes."""
    seed = ctx.get("hold")[0].content
    Path(seed["started"]).touch()
    deadline = time.monotonic() + 300
    while not Path(seed["until"]).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return [Proposal("released", True)]


def _job(name: str, *, approvers: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    hitl: dict[str, Any] = {
        "keys": ["license.unknown"],
        "summary": "Classify {content[name]}",
        "approvals_required": 10,
    }
    suggestors = SUGGESTORS
    if approvers is not None:
        hitl["approvers"] = approvers
        suggestors = ["tests.accessfixtures:secret_scan", *SUGGESTORS[1:]]
    return {
        "name": name,
        "suggestors": suggestors,
        "budget": {"max_cycles": 10},
        "gates": [{"hitl": hitl}],
        "initial": {"seed": [1]},
        **extra,
    }


@dataclass
class Scene:
    """The store's URL, each person's token, the job files and the runs (their ids)
    and gates (the pending gate of each paused run)."""

    url: str
    tokens: dict[str, str]
    jobs: dict[str, Path]
    runs: dict[str, str] = field(default_factory=dict)
    gates: dict[str, str] = field(default_factory=dict)

    def started(self) -> bool:
        """Whether the held run (``runs["queued"]``) is running, waiting for release."""
        return (self.jobs["held"].parent / "started").exists()

    def release(self) -> None:
        """Let the held run finish."""
        (self.jobs["held"].parent / "release").touch()


def build_scene(url: str, workdir: Path) -> Scene:
    """Record the people and runs of the module docstring in the store at ``url``."""
    jobs = {
        "open": write_job(workdir / "open.yaml", _job("access-open")),
        "hidden": write_job(workdir / "hidden.yaml", _job("access-hidden", visible_to=["legal"])),
        "restricted": write_job(
            workdir / "restricted.yaml", _job("access-restricted", approvers=["legal"])
        ),
        "stopped": write_job(
            workdir / "stopped.yaml",
            {"name": "access-done", "suggestors": SUGGESTORS, "initial": {"seed": [1]}},
        ),
    }
    store = open_store(url)
    try:
        tokens = {name: add_token(store, name, role) for name, role in ROLES.items()}
        tokens["lena"] = add_token(store, "lena", "approver")
        tokens["oscar"] = add_token(store, "oscar", "approver")
        add_to_groups(store, "lena", ["legal"])
        scene = Scene(url, tokens, jobs)
        for name, job in [
            ("open", "open"),
            ("decide-api", "open"),
            ("decide-page", "open"),
            ("decide-cli", "open"),
            ("hidden", "hidden"),
            ("restricted", "restricted"),
            ("stopped", "stopped"),
        ]:
            loaded = load_job(jobs[job])
            result = loaded.build_engine(store).run(loaded.spec.initial or None)
            scene.runs[name] = result.run_id
            gate = getattr(result.stop_reason, "gate_id", None)
            if gate is not None:
                scene.gates[name] = gate
        # a run left to a worker: `converge serve` takes it up and it stays running
        # until the test releases it (Scene.release)
        hold = {"until": str(workdir / "release"), "started": str(workdir / "started")}
        jobs["held"] = write_job(
            workdir / "held.yaml",
            {"name": "access-held", "suggestors": ["tests.accessfixtures:blocked"],
             "initial": {"hold": [hold]}},
        )  # fmt: skip
        held = load_job(jobs["held"])
        scene.runs["queued"] = new_run_id()
        queue_run(store, RunHeader(scene.runs["queued"], held.name, held.record(), (), 0.0))
        return scene
    finally:
        store.close()


def counts(store: SqlRunStore, excluding: frozenset[str] = frozenset()) -> dict[str, int]:
    """What a refused action must leave as it was: events (but those of the runs
    ``excluding``, which the server's pool is running), votes, runs, tokens, cancel
    requests; and the access log, which a refusal adds one row to."""
    tables = ("audit_events", "gate_votes", "runs", "api_tokens", "run_cancels", "access_log")
    found: dict[str, int] = {}
    with store.sql_engine.connect() as conn:
        for table in tables:
            try:
                if table == "audit_events" and excluding:
                    rows = conn.execute(text("SELECT run_id FROM audit_events"))
                    found[table] = sum(1 for r in rows if r[0] not in excluding)
                    continue
                found[table] = int(conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())
            except Exception:  # a feature's table not made yet: nothing in it
                conn.rollback()
                found[table] = 0
    return found


def runs_in_flight(store: SqlRunStore) -> frozenset[str]:
    """The runs queued or running now: the server's pool runs them (forks and resumes
    an earlier, allowed attempt started), writing their events whenever it gets to them."""
    with store.sql_engine.connect() as conn:
        rows = conn.execute(text("SELECT run_id FROM runs WHERE status IN ('queued', 'running')"))
        return frozenset(str(r[0]) for r in rows)


class PageClient:
    """One person signed in on the real server's pages (cookie and CSRF token)."""

    def __init__(self, base: str, token: str) -> None:
        self.http = httpx.Client(base_url=base, timeout=60, follow_redirects=False)
        login = self.http.get("/login")
        csrf = _csrf(login.text)
        signed = self.http.post("/login", data={"csrf": csrf, "token": token, "next": "/"})
        assert signed.status_code == 303, signed.text
        self.csrf = _csrf(self.http.get("/").text)

    def get(self, path: str) -> httpx.Response:
        return self.http.get(path)

    def post(self, path: str, **fields: str) -> httpx.Response:
        return self.http.post(path, data={"csrf": self.csrf, **fields})

    def close(self) -> None:
        self.http.close()


def _csrf(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found is not None, page[:500]
    return found.group(1)


def redact_attempts(http: Any, run: Any) -> dict[Any, Any]:
    """The matrix's attempt at redacting (``Action.REDACT``) through the API, built
    with its ``_http`` and ``_run``: allowed once past the policy, where the stopped
    run's chain format 1 refuses it (409). The command's refusals are
    tests/test_redaction_surfaces.py's (a subprocess per role would cost the matrix
    its time budget)."""
    from converge.access import Action

    def api(m: Any, who: str) -> Any:
        path = f"/api/runs/{run(m, 'stopped')}/facts/seed%230/redact"
        return http(m.api(who, "POST", path, json={"reason": "request"}), (409,))

    return {(Action.REDACT, "api"): api}
