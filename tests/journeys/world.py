"""One journey's world: a fresh store of one kind with its people (a token each),
the job files, a few first runs, the real ``converge serve --db URL`` over it, and
the ways a journey acts on it and reads it.

- :meth:`World.api`: an HTTP request to the server as one person (bearer token);
  every answer is kept, and a 5xx fails the journey at once;
- :meth:`World.page`: one person signed in on the pages (cookie and CSRF);
- :meth:`World.act`: a ``converge`` command as a user types it, in a new
  interpreter (:func:`tests.faultfixtures.run_cli`), with ``--db`` and ``--token``;
- :meth:`World.ask`: a read-only ``converge`` command of the checks, in a child
  forked from this process (:func:`tests.faultfixtures.fork_cli`: the same command
  line, 0.2 s instead of 2-3 s of imports on a loaded machine);
- :meth:`World.table`: ``converge runs --json``, by run id.

Every process of the journey has ``CONVERGE_LEASE_S`` = :data:`LEASE_S`, so a run
whose holder died is taken over within seconds, not the default 30.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from audit import open_store
from audit.people import add_token
from converge.jobs import load_job
from tests.accessfixtures import PageClient
from tests.faultfixtures import CliOutcome, fork_cli, fork_race, run_cli
from tests.hitlfixtures import store_url_for
from tests.realserve import Served, served_cli
from tests.servicefixtures import beat_job, chain_job, gated_beat_job, write_job

__all__ = [
    "DECIDERS",
    "LEASE_S",
    "PEOPLE",
    "RUNNERS",
    "STOP_EXITS",
    "World",
]

LEASE_S = 5.0
"""``CONVERGE_LEASE_S`` of every process of a journey (seconds)."""
PEOPLE = {"ada": "admin", "rita": "runner", "alice": "approver", "victor": "viewer"}
"""Who uses the store, and their role (docs/access.md)."""
RUNNERS = ("ada", "rita", "alice")
"""Those who may run, submit, fork, resume and cancel runs."""
DECIDERS = ("ada", "alice")
"""Those who may decide gates."""
STOP_EXITS = {0: "success", 3: "budget", 10: "paused at a gate", 130: "cancelled"}
"""The exit codes a command that ran a journey's job may end with: how its run
stopped. Anything else (an error stop 5, a refusal 2, a crash) is a defect."""
HTTP_TIMEOUT_S = 60.0


def _jobs(workdir: Path) -> dict[str, Path]:
    """The job files: ``gated`` pauses at a gate in cycle 2 then beats three times;
    ``beat`` beats five times (about a second: long enough to cancel it or kill its
    worker); ``chain`` converges in three quick cycles; ``budget`` is stopped by its
    cycle budget after three of six beats (to resume)."""
    budget = {
        "name": "journey-budget",
        "suggestors": ["tests.servicejobs:beat"],
        "budget": {"max_cycles": 3},
        "initial": {"seed": [{"steps": 6, "sleep_ms": 100}]},
    }
    return {
        "gated": gated_beat_job(workdir / "gated.yaml", steps=3, sleep_ms=100),
        "beat": beat_job(workdir / "beat.yaml", steps=5, sleep_ms=250),
        "chain": chain_job(workdir / "chain.yaml"),
        "budget": write_job(workdir / "budget.yaml", budget),
    }


@dataclass
class World:
    """A store of ``kind`` under ``workdir``, its people and jobs, and the server
    over it; :meth:`close` stops everything it started."""

    kind: str
    workdir: Path
    stack: ExitStack = field(default_factory=ExitStack)
    url: str = ""
    tokens: dict[str, str] = field(default_factory=dict)
    jobs: dict[str, Path] = field(default_factory=dict)
    first_runs: dict[str, str] = field(default_factory=dict)
    served: Served | None = None
    http: httpx.Client | None = None
    answers: list[tuple[str, int]] = field(default_factory=list)

    def open(self) -> World:
        """Make the store, people, jobs and first runs, then start the server."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.url = self.stack.enter_context(store_url_for(self.kind, self.workdir))
        self.jobs = _jobs(self.workdir / "jobs")
        store = open_store(self.url)
        try:
            self.tokens = {name: add_token(store, name, role) for name, role in PEOPLE.items()}
            for name in ("gated", "beat"):  # a gate to decide, a run to fork into the pool
                job = load_job(self.jobs[name])
                self.first_runs[name] = job.build_engine(store).run(job.spec.initial).run_id
        finally:
            store.close()
        env = {"CONVERGE_LEASE_S": str(LEASE_S)}
        self.served = self.stack.enter_context(
            served_cli(self.url, self.workdir / "serve.log", env=env)
        )
        self.http = httpx.Client(base_url=self.served.base, timeout=HTTP_TIMEOUT_S)
        self.stack.callback(self.http.close)
        return self

    def close(self) -> None:
        """Stop the server (SIGTERM) and drop the store."""
        self.stack.close()

    @property
    def base(self) -> str:
        assert self.served is not None
        return self.served.base

    def answered(self) -> str:
        """How many API answers of each status the journey got, e.g. ``202: 3, 200: 9``."""
        counted = Counter(status for _, status in self.answers)
        return ", ".join(f"{status}: {n}" for status, n in sorted(counted.items()))

    def server_log(self) -> str:
        """What the server (and its pool's workers) printed so far."""
        assert self.served is not None
        return self.served.output()

    # -- acting --------------------------------------------------------------------------
    def api(self, method: str, path: str, who: str, **kwargs: Any) -> httpx.Response:
        """``method path`` as ``who`` (their bearer token); a 5xx fails at once."""
        assert self.http is not None
        headers = {"Authorization": f"Bearer {self.tokens[who]}"}
        answer = self.http.request(method, path, headers=headers, **kwargs)
        self.answers.append((f"{method} {path}", answer.status_code))
        said = f"{method} {path} as {who}: {answer.status_code} {answer.text}"
        assert answer.status_code < 500, said
        return answer

    def page(self, who: str) -> PageClient:
        """``who`` signed in on the pages (closed by the caller)."""
        return PageClient(self.base, self.tokens[who])

    def act(self, *args: str, who: str | None = None) -> CliOutcome:
        """``converge ARGS --db URL [--token T]`` in a new interpreter; a crash fails."""
        argv = [*args, "--db", self.url]
        if who is not None:
            argv += ["--token", self.tokens[who]]
        outcome = run_cli(argv, env={"CONVERGE_LEASE_S": str(LEASE_S)})
        assert not outcome.crashed, f"converge {' '.join(args)} crashed:\n{outcome.stderr}"
        return outcome

    # -- reading -------------------------------------------------------------------------
    def ask(self, *args: str) -> CliOutcome:
        """A read-only ``converge ARGS --db URL`` as whoever holds the store."""
        outcome = fork_cli([*args, "--db", self.url], self.workdir / "asked")
        assert not outcome.crashed, f"converge {' '.join(args)} crashed:\n{outcome.stderr}"
        return outcome

    def ask_all(self, commands: list[list[str]]) -> list[CliOutcome]:
        """Several read-only commands at once (each in its own forked child)."""
        if not commands:
            return []
        outcomes = fork_race([[*c, "--db", self.url] for c in commands], self.workdir / "asked")
        for command, outcome in zip(commands, outcomes, strict=True):
            assert not outcome.crashed, f"converge {' '.join(command)} crashed:\n{outcome.stderr}"
        return outcomes

    def table(self) -> dict[str, dict[str, Any]]:
        """Every run as ``converge runs --json`` shows it, by run id."""
        listed = self.ask("runs", "--json", "--limit", "0")
        assert listed.returncode == 0, listed
        return {row["run_id"]: row for row in json.loads(listed.stdout)}

    def gates(self, *, pending: bool, who: str | None = None) -> list[dict[str, Any]]:
        """``converge gates --json [--pending]``, as ``who`` (their token) or the store's
        holder."""
        args = ["gates", "--json", *(["--pending"] if pending else [])]
        listed = self.ask(*args, *(["--token", self.tokens[who]] if who else []))
        assert listed.returncode == 0, listed
        found: list[dict[str, Any]] = json.loads(listed.stdout)
        return found


def process_of(pid: int) -> str:
    """The command line of process ``pid`` ('' when it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def is_worker(pid: int | None) -> bool:
    """Whether ``pid`` is a live ``converge worker`` process (of the pool, or one that
    ``converge submit`` started), never this process nor the server."""
    if pid is None or pid == os.getpid():
        return False
    line = process_of(pid)
    return "converge.cli worker" in line or "converge worker" in line
