"""``Engine.resume_run``: "I hit the limit, keep what was done and go on"."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from audit import open_store
from converge.cli import app
from engine import (
    AuditEvent,
    Budget,
    Claim,
    Context,
    Converged,
    CycleBudgetExhausted,
    Engine,
    FunctionSuggestor,
    GateAlreadyDecided,
    GateDecision,
    GateNotFound,
    GateRecord,
    Proposal,
    ResumeError,
    RunBusy,
    RunHeader,
    RunNotFound,
    RunOutcome,
    RunResult,
    RunStore,
)
from engine.facts import fact_to_dict


class MemoryStore:
    """An in-memory :class:`RunStore`: events, outcomes and JSON checkpoints per run.

    Checkpoints go through JSON, as they would through a database, so a second
    engine resuming from this store behaves like another process.
    """

    def __init__(self) -> None:
        self.headers: dict[str, RunHeader] = {}
        self.events: dict[str, list[AuditEvent]] = {}
        self.outcomes: dict[str, RunOutcome] = {}
        self.status: dict[str, str] = {}
        self.epochs: dict[str, int] = {}
        self.checkpoints: dict[str, str] = {}
        self.gates: dict[str, GateRecord] = {}

    def start_run(self, header: RunHeader, events: Sequence[AuditEvent]) -> None:
        self.headers[header.run_id] = header
        self.events[header.run_id] = list(events)
        self.status[header.run_id] = "running"

    def append_events(self, run_id: str, events: Sequence[AuditEvent]) -> None:
        self.events[run_id].extend(events)

    def finish_run(
        self,
        run_id: str,
        events: Sequence[AuditEvent],
        outcome: RunOutcome,
        checkpoint: dict[str, Any] | None = None,
    ) -> None:
        self.events[run_id].extend(events)
        self.outcomes[run_id] = outcome
        self.status[run_id] = "stopped"
        if checkpoint is not None:
            self.checkpoints[run_id] = json.dumps(checkpoint)

    def pause_run(
        self,
        run_id: str,
        events: Sequence[AuditEvent],
        outcome: RunOutcome,
        gate: GateRecord,
        checkpoint: dict[str, Any],
    ) -> None:
        self.events[run_id].extend(events)
        self.outcomes[run_id] = outcome
        self.status[run_id] = "paused"
        self.gates[gate.gate_id] = gate
        self.checkpoints[run_id] = json.dumps(checkpoint)

    def get_gate(self, gate_id: str) -> GateRecord:
        try:
            return self.gates[gate_id]
        except KeyError:
            raise GateNotFound(gate_id) from None

    def decide_gate(self, gate_id: str, decision: GateDecision, status: str) -> GateRecord:
        gate = self.get_gate(gate_id)
        if gate.status != "pending":
            raise GateAlreadyDecided(gate_id, gate.status, gate.decided_by)
        return gate

    def claim_resume(
        self,
        run_id: str,
        expected_epoch: int | None = None,
        expected_seq: int | None = None,
        events: Sequence[AuditEvent] = (),
    ) -> Claim:
        was = self.status.get(run_id)
        if was not in ("paused", "stopped"):
            raise RunBusy(run_id)
        epoch = self.epochs.get(run_id, 0)
        if expected_epoch is not None and expected_epoch != epoch:
            raise RunBusy(run_id)
        self.status[run_id] = "running"
        self.epochs[run_id] = epoch + 1
        self.append_events(run_id, events)
        return Claim(run_id, epoch + 1, was)

    def release_claim(self, claim: Claim) -> None:
        if self.epochs.get(claim.run_id) == claim.epoch:
            self.status[claim.run_id] = claim.was

    def load_checkpoint(self, run_id: str) -> dict[str, Any]:
        try:
            data: dict[str, Any] = json.loads(self.checkpoints[run_id])
        except KeyError:
            raise ResumeError(f"no checkpoint for run {run_id}") from None
        return data

    def get_run_header(self, run_id: str) -> RunHeader:
        try:
            return self.headers[run_id]
        except KeyError:
            raise RunNotFound(run_id) from None

    def kinds(self, run_id: str) -> list[str]:
        """The kinds of the run's events, in order."""
        return [e.kind for e in self.events[run_id]]


def counter_suggestors() -> list[FunctionSuggestor]:
    """Two suggestors that converge after 12 cycles: ``up`` counts to 12, ``echo``
    copies each number (so facts of two suggestors interleave)."""

    def up(ctx: Context) -> list[Proposal]:
        n = ctx.count("n")
        return [Proposal("n", n, parents=(ctx.get("n")[-1].id,))] if 0 < n < 12 else []

    def echo(ctx: Context) -> list[Proposal]:
        return [Proposal("echo", f.content) for f in ctx.get("n")]

    return [
        FunctionSuggestor(up, "up", dependencies=["n"]),
        FunctionSuggestor(echo, "echo", dependencies=["n"]),
    ]


def snapshot(result: RunResult) -> list[dict[str, Any]]:
    return [fact_to_dict(f) for f in result.facts]


def test_resume_run_after_the_cycle_budget_matches_one_run_with_the_larger_budget() -> None:
    reference = Engine(budget=Budget(max_cycles=50)).register(*counter_suggestors())
    whole = reference.run({"n": [0, 1]}, run_id="whole")
    assert whole.stop_reason == Converged()

    engine = Engine(budget=Budget(max_cycles=4)).register(*counter_suggestors())
    first = engine.run({"n": [0, 1]}, run_id="legs")
    assert first.stop_reason == CycleBudgetExhausted(cycles_executed=4, limit=4)
    assert first.stop_reason.is_resumable()
    kept = snapshot(first)

    resumed = engine.resume_run("legs", budget=Budget(max_cycles=50))
    assert resumed.stop_reason == Converged()
    assert resumed.run_id == "legs"
    assert snapshot(resumed)[: len(kept)] == kept  # what was done is kept as it was
    assert snapshot(resumed) == snapshot(whole)  # ids, order, provenance
    assert resumed.facts_root == whole.facts_root
    assert resumed.cycles == whole.cycles
    assert resumed.budget_status.dimensions["cycles"].limit == 50


def test_resume_run_can_take_several_legs() -> None:
    engine = Engine(budget=Budget(max_cycles=3)).register(*counter_suggestors())
    engine.run({"n": [0, 1]}, run_id="r")
    second = engine.resume_run("r", budget=Budget(max_cycles=6))
    assert second.stop_reason == CycleBudgetExhausted(cycles_executed=6, limit=6)
    third = engine.resume_run("r", budget=Budget(max_cycles=50))
    whole = Engine(budget=Budget(max_cycles=50)).register(*counter_suggestors())
    assert snapshot(third) == snapshot(whole.run({"n": [0, 1]}))


def test_resume_run_through_a_store_in_another_engine_gives_the_same_facts() -> None:
    store = MemoryStore()
    whole = Engine(budget=Budget(max_cycles=50)).register(*counter_suggestors()).run({"n": [0, 1]})

    first_engine = Engine(budget=Budget(max_cycles=5), store=store)
    first = first_engine.register(*counter_suggestors()).run({"n": [0, 1]}, run_id="stored")
    assert first.stop_reason.is_budget_exhausted()
    assert "stored" in store.checkpoints

    other_process = Engine(budget=Budget(max_cycles=5), store=store)
    other_process.register(*counter_suggestors())
    resumed = other_process.resume_run("stored", budget=Budget(max_cycles=50))
    assert resumed.stop_reason == Converged()
    assert snapshot(resumed) == snapshot(whole)
    assert store.outcomes["stored"].facts_root == whole.facts_root
    kinds = store.kinds("stored")
    assert kinds.count("run_resumed") == 1 and kinds.count("run_stopped") == 2
    assert kinds.index("run_resumed") > kinds.index("run_stopped")


def test_resume_run_refuses_other_suggestors() -> None:
    store = MemoryStore()
    engine = Engine(budget=Budget(max_cycles=2), store=store).register(*counter_suggestors())
    engine.run({"n": [0, 1]}, run_id="x")
    other = Engine(store=store).register(counter_suggestors()[0])
    with pytest.raises(ResumeError, match="missing \\['echo'\\]"):
        other.resume_run("x", budget=Budget(max_cycles=50))


def test_a_finished_or_unknown_run_cannot_be_resumed() -> None:
    engine = Engine().register(*counter_suggestors())
    done = engine.run({"n": [0, 1]})
    assert done.stop_reason == Converged()
    with pytest.raises(RunNotFound):
        engine.resume_run(done.run_id, budget=Budget(max_cycles=500))
    with pytest.raises(RunNotFound):
        engine.resume_run("never-ran")


def test_the_memory_store_implements_the_run_store_protocol() -> None:
    assert isinstance(MemoryStore(), RunStore)


# --- through the real audit store (SQLite) and the CLI ---------------------------------


def test_resume_run_from_the_sqlite_audit_store_in_another_engine(tmp_path: Path) -> None:
    whole = Engine(budget=Budget(max_cycles=50)).register(*counter_suggestors()).run({"n": [0, 1]})
    url = str(tmp_path / "audit.db")
    store = open_store(url)
    try:
        first = Engine(budget=Budget(max_cycles=4), store=store).register(*counter_suggestors())
        assert first.run({"n": [0, 1]}, run_id="sql").stop_reason.is_budget_exhausted()
    finally:
        store.close()
    store = open_store(url)  # as another process would
    try:
        other = Engine(store=store).register(*counter_suggestors())
        resumed = other.resume_run("sql", budget=Budget(max_cycles=50))
        assert resumed.stop_reason == Converged()
        assert snapshot(resumed) == snapshot(whole)
        assert [fact_to_dict(f) for f in store.facts("sql")] == snapshot(whole)
        assert store.run("sql").facts_root == whole.facts_root
        assert store.verify("sql").ok
    finally:
        store.close()


JOB = """\
name: counter
suggestors: [tests.test_resume_run:counter_suggestors]
budget: {max_cycles: 4}
initial: {n: [0, 1]}
"""


def _cli_run_out_of_cycles(tmp_path: Path) -> tuple[CliRunner, str, dict[str, Any]]:
    """``converge run`` of ``JOB`` until its cycle budget stops it: the runner, the
    store's path and the run's JSON."""
    job = tmp_path / "job.yaml"
    job.write_text(JOB, encoding="utf-8")
    db = str(tmp_path / "cli.db")
    runner = CliRunner()
    first = runner.invoke(app, ["run", str(job), "--db", db, "--json"])
    assert first.exit_code == 3, first.output
    return runner, db, json.loads(first.stdout)


def test_converge_resume_goes_on_with_a_larger_cycle_budget(tmp_path: Path) -> None:
    runner, db, first = _cli_run_out_of_cycles(tmp_path)
    run_id = first["run_id"]
    second = runner.invoke(app, ["resume", run_id, "--max-cycles", "50", "--db", db, "--json"])
    assert second.exit_code == 0, second.output
    out = json.loads(second.stdout)
    assert out["run_id"] == run_id and out["stop_reason"]["kind"] == "converged"
    whole = Engine(budget=Budget(max_cycles=50)).register(*counter_suggestors()).run({"n": [0, 1]})
    assert out["facts_root"] == whole.facts_root


def test_converge_resume_refuses_a_budget_below_what_is_already_used(tmp_path: Path) -> None:
    runner, db, first = _cli_run_out_of_cycles(tmp_path)
    run_id, done = first["run_id"], first["cycles"]
    low = runner.invoke(app, ["resume", run_id, "--max-cycles", str(done), "--db", db])
    assert low.exit_code == 2
    message = " ".join(low.output.split())
    assert f"--max-cycles {done} is not above the {done} already used" in message
    assert "budgets are totals" in message and "Traceback" not in low.output
    bad = runner.invoke(app, ["resume", run_id, "--max-cost-usd", "-1", "--db", db])
    assert bad.exit_code == 2
    assert len(bad.output.strip().splitlines()) == 1
    assert "bad budget: --max-cost-usd:" in bad.output
    helped = runner.invoke(app, ["resume", "--help"], terminal_width=200)
    assert "Cycles in total, those done included" in " ".join(helped.output.split())
    # nothing was resumed: the run still stands where the first leg stopped it
    assert open_store(db).run(run_id).cycles == done
