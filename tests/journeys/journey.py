"""The steps of a journey (issue 53), each what a person does through the real
``converge serve`` (its API, its pages, its pool of worker processes) or a real
``converge`` command, and the end of a journey. :class:`Journey` holds one world
(store, people, server), its journal and its checker; ``tests/journeys/
test_journeys.py`` draws the steps from a seed and checks after each one.

A step takes what it acts on (a run, a gate) among those there are now, by a
number drawn with it (modulo their count, in a fixed order); when there is none, it
first makes one the way a user would (runs the gated job, submits a run...), so
every step acts.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

from audit import open_store
from tests.faultfixtures import CliOutcome
from tests.journeys.checks import STREAM_END_S, TAKEOVER_S, Checker, Journal
from tests.journeys.streams import Follower
from tests.journeys.world import STOP_EXITS, World, is_worker

__all__ = ["STEPS", "Journey"]

STEPS = (
    "run",
    "submit",
    "fork",
    "decide",
    "comment",
    "cancel",
    "resume",
    "replay",
    "follow",
    "kill_worker",
)
"""The steps a journey is made of (methods of :class:`Journey`)."""

SETTLE_S = TAKEOVER_S + 30.0
"""How long (seconds) the runs of a journey may take to come to rest at its end."""
RUNNING_WITHIN_S = 60.0
"""How long (seconds) a run sent to a worker may take to be running there."""


def _pick(rows: list[dict[str, Any]], pick: int) -> dict[str, Any]:
    """One of ``rows`` (in a fixed order: when they started, then their id)."""

    def order(row: dict[str, Any]) -> tuple[float, str]:
        return (row.get("started_at") or row.get("opened_at") or 0.0, row.get("gate_id") or "")

    ordered = sorted(rows, key=lambda r: (*order(r), r["run_id"]))
    return ordered[pick % len(ordered)]


class Journey:
    """One journey: a world (store, people, server), its journal and its checker.
    Its steps are the methods :data:`STEPS` names; :meth:`finish` ends it."""

    def __init__(self, kind: str, workdir: Path, journal: Journal) -> None:
        self.journal = journal
        self.world = World(kind, workdir)
        try:
            self.world.open()
        except BaseException:
            self.world.close()
            raise
        self.checker = Checker(self.world, self.journal)
        self.journal.step(f"a store with {sorted(self.world.first_runs)} runs; converge serve")

    # -- helpers -------------------------------------------------------------------------
    def runs(self, *statuses: str) -> list[dict[str, Any]]:
        """The runs whose status is one of ``statuses``, now."""
        return [r for r in self.world.table().values() if r["status"] in statuses]

    def expect(self, ok: bool, what: str) -> None:
        if not ok:
            self.journal.fail(what)

    def expect_stop_exit(self, command: str, outcome: CliOutcome) -> None:
        """A command that ran a run exits with how it stopped (:data:`STOP_EXITS`)."""
        self.expect(outcome.returncode in STOP_EXITS, f"{command}: {outcome}\n{outcome.stdout}")
        self.journal.step(f"   -> exit {outcome.returncode} ({STOP_EXITS[outcome.returncode]})")

    def pending_gates(self, who: str) -> list[dict[str, Any]]:
        """The pending gates; when there is none, ``who`` runs the gated job first."""
        gates = self.world.gates(pending=True)
        if not gates:
            self.journal.step(f"   (no pending gate: {who} runs the gated job first)")
            ran = self.world.act("run", str(self.world.jobs["gated"]), who=who)
            self.expect(ran.returncode == 10, f"converge run gated: {ran}")
            gates = self.world.gates(pending=True)
        return gates

    def submitted(self, job: str, who: str) -> str:
        """``converge submit JOB`` as ``who``: the new run's id."""
        out = self.world.act("submit", str(self.world.jobs[job]), who=who)
        self.expect(out.returncode == 0, f"converge submit {job}: {out}")
        return out.stdout.strip().split()[-1]

    # -- the steps -----------------------------------------------------------------------
    def run(self, job: str, who: str) -> None:
        """``converge run JOB`` in the foreground: exits with its stop."""
        self.journal.step(f"{who}: converge run {job}")
        out = self.world.act("run", str(self.world.jobs[job]), who=who)
        self.expect_stop_exit(f"converge run {job}", out)
        expected = {"gated": 10, "budget": 3}.get(job, 0)
        self.expect(out.returncode == expected, f"converge run {job}: {out}, not {expected}")

    def submit(self, job: str, who: str) -> None:
        """``converge submit JOB``: queued at once, run by a background worker."""
        self.journal.step(f"{who}: converge submit {job}")
        self.journal.step(f"   -> run {self.submitted(job, who)}")

    def fork(self, pick: int, cycle: int, who: str, via: str) -> None:
        """Fork a stopped or paused run at one of its cycles, from the API (the pool
        runs the fork) or the command (in the foreground)."""
        row = _pick(self.runs("stopped", "paused"), pick)
        run_id, at = row["run_id"], cycle % (row["cycles"] + 1)
        self.journal.step(f"{who}: fork run {run_id} ({row['kind']}) at cycle {at} via {via}")
        if via == "api":
            answer = self.world.api("POST", f"/api/runs/{run_id}/fork", who, json={"cycle": at})
            self.expect(answer.status_code == 202, f"fork: {answer.status_code} {answer.text}")
            fork = answer.json()["run_id"]
            self.journal.step(f"   -> 202, fork {fork}")
            return
        out = self.world.act("fork", run_id, "--at-cycle", str(at), who=who)
        self.expect_stop_exit(f"converge fork {run_id} --at-cycle {at}", out)

    def decide(self, pick: int, approve: bool, who: str, via: str) -> None:
        """Approve or reject a pending gate from the API, the gate page's form or the
        command; it is decided at once (the API and the form: its run resumes on a
        pool worker; the command: in the foreground)."""
        gate = _pick(self.pending_gates(who), pick)
        gate_id = gate["gate_id"]
        verdict = "approve" if approve else "reject"
        reason = f"journey: {verdict} by {who}"
        self.journal.step(f"{who}: {verdict} gate {gate_id} via {via}")
        if via == "cli":
            out = self.world.act(verdict, gate_id, "--reason", reason, who=who)
            self.expect_stop_exit(f"converge {verdict} {gate_id}", out)
        else:
            status, text = self._decide_online(gate_id, approve, reason, who, via)
            wanted = 202 if via == "api" else 303
            self.expect(status == wanted, f"{verdict} via {via}: {status} {text[:500]}")
        still = {g["gate_id"] for g in self.world.gates(pending=True)}
        self.expect(gate_id not in still, f"gate {gate_id} still pending after its decision")

    def _decide_online(
        self, gate_id: str, approve: bool, reason: str, who: str, via: str
    ) -> tuple[int, str]:
        if via == "api":
            body = {"approved": approve, "reason": reason}
            answer = self.world.api("POST", f"/api/gates/{gate_id}/decision", who, json=body)
            return answer.status_code, answer.text
        page = self.world.page(who)
        try:
            verdict = "approve" if approve else "reject"
            posted = page.post(f"/gates/{gate_id}/decision", decision=verdict, reason=reason)
            return posted.status_code, posted.text
        finally:
            page.close()

    def comment(self, pick: int, who: str, via: str) -> None:
        """Comment on a gate (any: pending or decided); the comment is in its history."""
        gate = _pick(self.world.gates(pending=False) or self.pending_gates("alice"), pick)
        gate_id, text = gate["gate_id"], f"journey comment {len(self.journal.steps)} by {who}"
        self.journal.step(f"{who}: comment on gate {gate_id} ({gate['status']}) via {via}")
        if via == "api":
            body = {"text": text}
            answer = self.world.api("POST", f"/api/gates/{gate_id}/comments", who, json=body)
            self.expect(answer.status_code == 201, f"comment: {answer.status_code} {answer.text}")
        else:
            out = self.world.act("comment", gate_id, text, who=who)
            self.expect(out.returncode == 0, f"converge comment {gate_id}: {out}")
        history = self.world.api("GET", f"/api/gates/{gate_id}/history", "alice")
        self.expect(text in history.text, f"the comment is not in gate {gate_id}'s history")

    def cancel(self, pick: int, who: str, via: str) -> None:
        """Cancel a queued or running run (when there is none, a submitted one)."""
        live = self.runs("queued", "running")
        if live:
            run_id = _pick(live, pick)["run_id"]
        else:
            run_id = self.submitted("beat", who)
            self.journal.step(f"   (no queued or running run: {who} submitted {run_id})")
        self.journal.step(f"{who}: cancel run {run_id} via {via}")
        if via == "api":
            answer = self.world.api("POST", f"/api/runs/{run_id}/cancel", who)
            status, said = answer.status_code, answer.text
            done = status == 409
            self.expect(status in (202, 409), f"cancel: {status} {said}")
        else:
            out = self.world.act("cancel", run_id, who=who)
            done, said = out.returncode == 2, str(out)
            self.expect(out.returncode in (0, 2), f"converge cancel {run_id}: {out}")
        if done:  # refused: only when it is no longer queued or running
            now = self.world.table()[run_id]["status"]
            self.expect(now in ("stopped", "paused"), f"cancel refused ({said}) of a {now} run")
        self.journal.step(f"   -> {'refused: it ended first' if done else 'cancel requested'}")

    def resume(self, pick: int, who: str) -> None:
        """``converge resume`` a run stopped by its budget or a cancel (when there is
        none, the budget job run first)."""
        stopped = [
            r
            for r in self.runs("stopped")
            if r["kind"] in ("cycle_budget_exhausted", "user_cancelled")
        ]
        if not stopped:
            self.journal.step(f"   (nothing to resume: {who} runs the budget job first)")
            ran = self.world.act("run", str(self.world.jobs["budget"]), who=who)
            self.expect(ran.returncode == 3, f"converge run budget: {ran}")
            stopped = [r for r in self.runs("stopped") if r["kind"] == "cycle_budget_exhausted"]
        row = _pick(stopped, pick)
        self.journal.step(f"{who}: converge resume {row['run_id']} ({row['kind']})")
        out = self.world.act("resume", row["run_id"], "--add-cycles", "10", who=who)
        self.expect_stop_exit(f"converge resume {row['run_id']}", out)

    def replay(self, pick: int) -> None:
        """``converge replay`` a stopped run (not a fork) as a viewer."""
        stopped = [r for r in self.runs("stopped") if r["parent_run_id"] is None]
        row = _pick(stopped, pick)
        self.journal.step(f"victor: converge replay {row['run_id']} ({row['kind']})")
        out = self.world.act("replay", row["run_id"], "--json", who="victor")
        self.checker.judge_replay(row, out)

    def follow(self, pick: int, who: str, since: str) -> None:
        """Follow a run's event stream, from its start or as a client reconnecting
        (``Last-Event-ID``) in the middle of it or after its last event."""
        row = _pick(list(self.world.table().values()), pick)
        last = {"start": None, "middle": row["last_seq"] // 2, "end": row["last_seq"]}[since]
        streams = self.world.workdir / "streams"
        follower = Follower(self.world.base, row["run_id"], self.world.tokens[who], streams, last)
        self.checker.followers.append(follower.start())
        self.journal.step(f"{who}: follow run {row['run_id']} ({row['status']}) from {since}")

    def kill_worker(self, pick: int, pool: bool) -> None:
        """kill -9 the worker running a run (when none runs, a fork sent to the pool
        or a submitted run, once a worker runs it); it must be taken over."""
        held = [r for r in self.runs("running") if is_worker(r["pid"])]
        if held:
            run_id = _pick(held, pick)["run_id"]
        elif pool:
            beat = self.world.first_runs["beat"]
            answer = self.world.api("POST", f"/api/runs/{beat}/fork", "ada", json={"cycle": 0})
            self.expect(answer.status_code == 202, f"fork: {answer.status_code} {answer.text}")
            run_id = answer.json()["run_id"]
            self.journal.step(f"   (no run on a worker: ada forked {beat} into the pool: {run_id})")
        else:
            run_id = self.submitted("beat", "rita")
            self.journal.step(f"   (no run on a worker: rita submitted {run_id})")
        pid = self._worker_of(run_id)
        if pid is None:
            self.journal.step(f"   run {run_id} ended before its worker could be killed")
            return
        os.kill(pid, signal.SIGKILL)
        self.journal.step(f"kill -9 worker {pid} of run {run_id}")

    def _worker_of(self, run_id: str) -> int | None:
        """The pid of the worker running ``run_id`` once it runs (None if it ended first)."""
        deadline = time.monotonic() + RUNNING_WITHIN_S
        store = open_store(self.world.url)
        try:
            while time.monotonic() < deadline:
                row = store.run(run_id)
                if row.status == "running" and is_worker(row.pid):
                    return row.pid
                if row.status in ("stopped", "paused"):
                    return None
                time.sleep(0.02)
        finally:
            store.close()
        self.journal.fail(f"run {run_id} was not running on a worker within {RUNNING_WITHIN_S} s")

    # -- the end -------------------------------------------------------------------------
    def close(self) -> None:
        """End the streams still open, stop the server, drop the store."""
        for follower in self.checker.followers:
            follower.stop()
        self.world.close()

    def finish(self) -> None:
        """Every run comes to rest; every pending gate is decided through ``converge
        approve`` by an approver; then every stream ends and every check holds."""
        self.journal.step("the end: wait for the runs, approve every pending gate (CLI)")
        for _ in range(3):
            self.settle()
            gates = self.world.gates(pending=True)
            if not gates:
                break
            for gate in gates:
                self.journal.step(f"alice: converge approve {gate['gate_id']}")
                out = self.world.act("approve", gate["gate_id"], "--reason", "the end", who="alice")
                self.expect_stop_exit(f"converge approve {gate['gate_id']}", out)
        self.settle()
        self.expect(not self.world.gates(pending=True), "gates still pending after the end")
        deadline = time.monotonic() + STREAM_END_S + 2.0
        while self.checker.open_streams() and time.monotonic() < deadline:
            time.sleep(0.1)
        self.checker.check()
        still = self.checker.open_streams()
        self.expect(
            not still,
            "streams open after every run stopped: " + "; ".join(f.describe() for f in still),
        )

    def settle(self) -> None:
        """Wait until no run is queued, running or crashed (:data:`SETTLE_S` at most)."""
        deadline = time.monotonic() + SETTLE_S
        while busy := self.runs("queued", "running", "crashed"):
            if time.monotonic() > deadline:
                self.journal.fail(
                    f"runs not at rest {SETTLE_S} s after the last step: "
                    + "; ".join(f"{r['run_id']} {r['status']} pid {r['pid']}" for r in busy)
                )
            time.sleep(0.5)
