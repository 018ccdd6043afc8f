"""What users rely on, checked after every step of a journey (issue 53):

- **no 5xx**: no answer of the server is a 5xx (:meth:`World.api` fails at once),
  and its log (and its pool's workers') holds no 5xx, no ``500 Internal`` and no
  traceback;
- **every run verifies**: ``converge verify --all`` exits 0;
- **every stopped run replays** to the same facts and stop: ``converge replay RUN``
  exits 0 for each run that stopped since the last check (a fork is replayed as its
  parent, docs/time-travel.md; a run whose last stop is a cancel replays the same
  up to the cycle of the cancel, time not being replayed: its divergences are all
  at or after that cycle);
- **no run fails**: no run stops with an ``error`` or ``validation`` stop (the jobs
  are correct: such a stop is a seam that broke);
- **nobody's run is left behind**: no run stays ``queued`` or ``crashed`` (running
  with no live holder) longer than :data:`TAKEOVER_S`;
- **every pending gate can be decided by a person allowed to**: the approver's
  ``converge gates --pending --token`` and ``GET /api/gates`` list every gate the
  store has pending, the latter each with
  ``may_decide``, and ``POST /api/gates/{id}/statement`` (the decision as it would
  be recorded: records nothing) answers 200 (the end of a journey decides them all
  through the command line: :meth:`tests.journeys.journey.Journey.finish`);
- **every stream ends once its run stops**: within :data:`STREAM_END_S` of the
  stop, having sent every event once, in order, the last ``run_stopped``; a
  reconnect after the last event of a stopped run is told so (204 No Content, or
  200 with ``run_stopped`` again), not answered 200 with nothing (an
  ``EventSource`` would reconnect forever).

A failure fails the journey at once with its seed and its steps (:class:`Journal`).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any, NoReturn

from tests.faultfixtures import CliOutcome
from tests.journeys.streams import Follower
from tests.journeys.world import LEASE_S, World

__all__ = ["STREAM_END_S", "TAKEOVER_S", "Checker", "Journal"]

TAKEOVER_S = LEASE_S + 25.0
"""How long (seconds) a run may stay queued, or running with no live holder, before
a worker takes it: a lease, plus the start of a worker process and the runs ahead
of it in the pool on a loaded 2-core machine."""
STREAM_END_S = 5.0
"""How long (seconds) a stream may stay open once its run stopped (the server reads
new events every 25 ms)."""
BAD_LOG = re.compile(r'HTTP/1\.[01]" 5\d\d|500 Internal|Traceback \(most recent call last\)')
FAILED_STOPS = ("error", "validation")


@dataclass
class Journal:
    """A journey's seed, store and steps: what reproduces it."""

    seed: str
    kind: str
    steps: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    def step(self, line: str) -> None:
        """Record (and print: pytest shows it with a failure) one step."""
        self.steps.append(f"[{time.monotonic() - self.started:5.1f} s] {line}")
        print(f"[journey {self.kind} seed {self.seed}] {self.steps[-1]}", flush=True)

    def fail(self, what: str) -> NoReturn:
        """Fail the journey: what broke, then how to reproduce it."""
        raise AssertionError(f"{what}\n\n{self.render()}")

    def render(self) -> str:
        """The seed, the store and the steps so far."""
        seed, _, number = self.seed.partition(".")
        head = (
            f"journey {self.seed} on {self.kind} (again: CONVERGE_JOURNEY_SEED={seed} pytest "
            f"'tests/journeys/test_journeys.py::test_journey[{self.kind}-{seed}.{number}]'):"
        )
        return "\n".join([head, *(f"  {s}" for s in self.steps)])


@dataclass
class Checker:
    """The invariants of the module docstring over ``world``."""

    world: World
    journal: Journal
    followers: list[Follower] = field(default_factory=list)
    replayed: set[tuple[str, float]] = field(default_factory=set)
    unheld_since: dict[str, float] = field(default_factory=dict)
    streams_judged: set[int] = field(default_factory=set)
    log_seen: int = 0

    def check(self) -> dict[str, dict[str, Any]]:
        """Every invariant once; the runs' table it read."""
        self.server_log()
        table = self.world.table()
        self.nobody_left_behind(table)
        self.no_failed_stop(table)
        self.verify_all()
        self.replays(table)
        self.pending_gates()
        self.streams(table)
        self.server_log()
        return table

    # -- the server's log ------------------------------------------------------------------
    def server_log(self) -> None:
        """No 5xx, ``500 Internal`` or traceback printed since the last look."""
        text = self.world.server_log()
        new, self.log_seen = text[self.log_seen :], len(text)
        bad = [line for line in new.splitlines() if BAD_LOG.search(line)]
        if bad:
            self.journal.fail("the server's log says:\n" + new[-4000:])

    # -- runs ------------------------------------------------------------------------------
    def nobody_left_behind(self, table: dict[str, dict[str, Any]]) -> None:
        """No run queued or crashed for longer than :data:`TAKEOVER_S`."""
        now = time.monotonic()
        for run_id, row in table.items():
            if row["status"] not in ("queued", "crashed"):
                self.unheld_since.pop(run_id, None)
                continue
            since = self.unheld_since.setdefault(run_id, now)
            if now - since > TAKEOVER_S:
                self.journal.fail(
                    f"run {run_id} is {row['status']} with nobody holding it for "
                    f"{now - since:.0f} s (> {TAKEOVER_S} s): {_brief(row)}"
                )

    def no_failed_stop(self, table: dict[str, dict[str, Any]]) -> None:
        """No run stopped with an error or validation stop."""
        for row in table.values():
            if row["status"] == "stopped" and row["category"] in FAILED_STOPS:
                self.journal.fail(f"run {row['run_id']} failed: {row['stop_reason']}")

    def verify_all(self) -> None:
        """``converge verify --all`` exits 0."""
        verified = self.world.ask("verify", "--all")
        if verified.returncode != 0:
            self.journal.fail(f"converge verify --all: {verified}\n{verified.stdout[-3000:]}")

    def replays(self, table: dict[str, dict[str, Any]]) -> None:
        """``converge replay`` of each run that stopped since the last check."""
        due: list[dict[str, Any]] = []
        for row in table.values():
            key = (row["run_id"], row["ended_at"])  # each stop once (not each comment)
            if row["status"] != "stopped" or key in self.replayed:
                continue
            self.replayed.add(key)
            if row["parent_run_id"] is None:  # a fork is replayed as its parent
                due.append(row)
        outcomes = self.world.ask_all([["replay", row["run_id"], "--json"] for row in due])
        for row, outcome in zip(due, outcomes, strict=True):
            self.judge_replay(row, outcome)

    def judge_replay(self, row: dict[str, Any], outcome: CliOutcome) -> None:
        """Fail unless the replay of ``row``'s run is the recorded run."""
        if outcome.returncode == 0:
            return
        run_id = row["run_id"]
        try:
            report: dict[str, Any] = json.loads(outcome.stdout)
        except json.JSONDecodeError:
            self.journal.fail(f"converge replay {run_id}: {outcome}\n{outcome.stdout[-2000:]}")
        divergences = report.get("divergences") or []
        if row["kind"] == "user_cancelled" and all(
            d["kind"] == "stop" or d["cycle"] >= row["cycles"] for d in divergences
        ):
            return  # the same run up to the cancel: time is not replayed
        first = report.get("first_divergence") or {}
        self.journal.fail(
            f"converge replay {run_id} ({row['kind']} after {row['cycles']} cycles): "
            f"{outcome}; first divergence {first.get('message')}"
        )

    # -- gates -----------------------------------------------------------------------------
    def pending_gates(self) -> None:
        """Every gate the store has pending is listed for an approver, who may decide
        it, and its decision's statement is answered."""
        store_ids = {g["gate_id"] for g in self.world.gates(pending=True)}
        alices = {g["gate_id"] for g in self.world.gates(pending=True, who="alice")}
        listed = self.world.api("GET", "/api/gates", "alice", params={"status": "pending"})
        api_gates = {g["gate_id"]: g for g in listed.json()}
        for where, ids in [("GET /api/gates", set(api_gates)), ("converge gates", alices)]:
            if store_ids - ids:
                self.journal.fail(f"{where} does not list {sorted(store_ids - ids)} to alice")
        for gate_id, gate in api_gates.items():
            if not gate.get("may_decide"):
                self.journal.fail(f"alice (approver) may not decide gate {gate_id}: {gate}")
            said = self.world.api(
                "POST",
                f"/api/gates/{gate_id}/statement",
                "alice",
                json={"approved": True, "reason": "journey check"},
            )
            if said.status_code != 200:
                self.journal.fail(f"gate {gate_id}'s statement: {said.status_code} {said.text}")

    # -- streams ---------------------------------------------------------------------------
    def streams(self, table: dict[str, dict[str, Any]]) -> None:
        """Each stream ended well, or is open while its run has not stopped (or stopped
        less than :data:`STREAM_END_S` ago)."""
        for follower in self.followers:
            if follower.number in self.streams_judged:
                continue
            if follower.ended:
                self.streams_judged.add(follower.number)
                self.judge_ended(follower, table.get(follower.run_id))
                continue
            late = _stopped_for(table.get(follower.run_id), follower.started_at)
            if late is not None and late > STREAM_END_S:
                self.journal.fail(
                    f"{follower.describe()}: its run stopped {late:.1f} s ago "
                    f"(> {STREAM_END_S} s) and the stream is still open"
                )

    def judge_ended(self, follower: Follower, row: dict[str, Any] | None) -> None:
        """An ended stream sent each event once, in order, up to ``run_stopped``."""
        events, status = follower.events(), follower.status
        at_end = (
            follower.last_event_id is not None
            and row is not None
            and row["status"] == "stopped"
            and follower.last_event_id >= row["last_seq"]
        )
        if at_end:  # told the run stopped: nothing more (204), or its stop again
            if status == 204 or (status == 200 and events and events[-1].kind == "run_stopped"):
                return
            self.journal.fail(f"{follower.describe()}: a reconnect after the stop, not told so")
        if status != 200:
            self.journal.fail(f"{follower.describe()}: answered {status}")
        start = follower.last_event_id or 0
        seqs = [e.seq for e in events]
        if seqs != list(range(start + 1, start + 1 + len(events))):
            self.journal.fail(f"{follower.describe()}: events out of order or missing: {seqs}")
        if not events or events[-1].kind != "run_stopped":
            self.journal.fail(f"{follower.describe()}: ended before its run stopped")

    def open_streams(self) -> list[Follower]:
        """The streams still open."""
        return [f for f in self.followers if not f.ended]


def _stopped_for(row: dict[str, Any] | None, since: float) -> float | None:
    """Seconds since the run stopped, counted from ``since`` at the earliest (unix
    seconds); None while it has not stopped."""
    if row is None or row["status"] != "stopped" or row["ended_at"] is None:
        return None
    return time.time() - max(float(row["ended_at"]), since)


def _brief(row: dict[str, Any]) -> str:
    keys = ("status", "kind", "cycles", "pid", "lease_holder", "lease_left_s", "parent_run_id")
    return ", ".join(f"{k}={row.get(k)}" for k in keys)
