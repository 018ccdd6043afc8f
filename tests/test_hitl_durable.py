"""HITL gates through an audit store: pause, resume in another process, crash, bad input.

Every test runs on SQLite and on PostgreSQL (``CONVERGE_TEST_PG_URL``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from freezegun import freeze_time
from sqlalchemy import create_engine, text

from audit import SqlRunStore, open_store
from engine import (
    Converged,
    Engine,
    GateAlreadyDecided,
    GateDecision,
    GateExpired,
    GateNotFound,
    HitlGatePending,
    HumanInterventionRequired,
    ResumeError,
)
from gates import require_approval
from tests.hitlfixtures import (
    INITIAL,
    SLOW_ENV,
    SUGGESTORS,
    count,
    facts_of,
    make_engine,
    scan,
    signed_off,
)

ROOT = Path(__file__).resolve().parent.parent


def new_run_id() -> str:
    return f"hitl-{uuid.uuid4().hex[:12]}"


def pause(store: SqlRunStore, **kw: Any) -> tuple[str, str]:
    """Start a run that pauses at its gate; (run id, gate id)."""
    run_id = new_run_id()
    result = make_engine(store, **kw).run(INITIAL, run_id=run_id)
    assert isinstance(result.stop_reason, HitlGatePending)
    return run_id, result.stop_reason.gate_id


def kinds(store: SqlRunStore, run_id: str) -> list[str]:
    return [e.kind for e in store.events(run_id)]


def state_of(store: SqlRunStore, run_id: str) -> tuple[str, int, str]:
    """What must not change after bad input: status, number of events, head hash."""
    row = store.run(run_id)
    return row.status, len(store.events(run_id)), row.head_hash


def uninterrupted(decision: GateDecision, run_id: str) -> list[dict[str, Any]]:
    """The facts of the same run decided in one process, with no store (same run id:
    the diagnostic of a rejection names the gate, whose id derives from it)."""
    engine = make_engine()
    first = engine.run(INITIAL, run_id=run_id)
    assert isinstance(first.stop_reason, HitlGatePending)
    return facts_of(engine.resume(first.stop_reason.gate_id, decision))


def helper(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Start ``python -m tests.hitlfixtures ARGS`` in a new process."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.hitlfixtures", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def helper_output(proc: subprocess.Popen[str]) -> dict[str, Any]:
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    out: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
    return out


# -- pause and resume through a store -----------------------------------------------


def test_an_approved_gate_promotes_the_proposal_and_the_chain_covers_the_whole_run(
    store: SqlRunStore,
) -> None:
    run_id, gate_id = pause(store)
    assert store.run(run_id).status == "paused"
    assert store.get_gate(gate_id).status == "pending"

    result = make_engine(store).resume(gate_id, GateDecision.approve(by="alice"))

    assert result.stop_reason == Converged()
    assert facts_of(result) == uninterrupted(GateDecision.approve(by="alice"), run_id)
    assert ("license.unknown", {"name": "b"}) in [(f.key, f.content) for f in result.context]
    assert [f.id for f in store.facts(run_id)] == [f.id for f in result.context]
    row = store.run(run_id)
    assert row.status == "stopped" and row.kind == "converged"
    assert store.get_gate(gate_id).decided_by == "alice"
    report = store.verify(run_id)
    assert report.ok, report
    assert report.events == row.last_seq == len(kinds(store, run_id))
    ks = kinds(store, run_id)
    hitl = [k for k in ks if k in ("gate_opened", "run_paused", "gate_decided", "run_resumed")]
    assert hitl == ["gate_opened", "run_paused", "gate_decided", "run_resumed"]
    assert ks[0] == "run_started" and ks[-1] == "run_stopped"


def test_a_rejected_gate_drops_the_proposal_records_a_diagnostic_and_the_chain_verifies(
    store: SqlRunStore,
) -> None:
    run_id, gate_id = pause(store)

    decision = GateDecision.reject(by="bob", reason="not ours")
    result = make_engine(store).resume(gate_id, decision)

    assert result.stop_reason == Converged()
    assert facts_of(result) == uninterrupted(decision, run_id)
    assert not result.context.has("license.unknown")
    [diag] = result.context.get("hitl.rejected")
    assert diag.content["by"] == "bob" and diag.content["reason"] == "not ours"
    assert result.context.get("done")[0].content == {"unknown": 0, "packages": 2}
    assert store.get_gate(gate_id).status == "rejected"
    assert store.verify(run_id).ok
    decided = store.events(run_id, kinds=["gate_decided"])
    assert [e.payload["approved"] for e in decided] == [False]
    ks = kinds(store, run_id)
    assert ks.index("gate_opened") < ks.index("run_paused") < ks.index("gate_decided")
    assert ks.index("gate_decided") < ks.index("run_resumed") < ks.index("run_stopped")


@pytest.mark.parametrize("verdict", ["approve", "reject"])
def test_a_run_resumed_in_another_process_has_the_facts_of_an_uninterrupted_run(
    store_url: str, verdict: str
) -> None:
    run_id = new_run_id()
    paused = helper_output(helper("run", store_url, run_id))
    assert paused["stop"] == "hitl_gate_pending"
    gate_id = f"{run_id}-g1"

    resumed = helper_output(helper("resume", store_url, gate_id, verdict, "carol"))

    decision = GateDecision(approved=verdict == "approve", by="carol")
    assert resumed["stop"] == "converged"
    assert resumed["facts"] == uninterrupted(decision, run_id)  # ids, contents, provenance, order
    if verdict == "approve":
        ungated = make_engine(gated=False).run(INITIAL)
        assert resumed["facts"] == facts_of(ungated)
    store = open_store(store_url)
    try:
        assert [f.id for f in store.facts(run_id)] == [f["id"] for f in resumed["facts"]]
        assert store.verify(run_id).ok
        assert store.run(run_id).status == "stopped"
    finally:
        store.close()


# -- crash recovery ----------------------------------------------------------------


def test_a_run_killed_during_its_resume_is_recovered_without_promoting_a_fact_twice(
    store_url: str, tmp_path: Path
) -> None:
    run_id = new_run_id()
    assert helper_output(helper("run", store_url, run_id))["stop"] == "hitl_gate_pending"
    marker = tmp_path / "finish-started"
    proc = helper(
        "resume", store_url, f"{run_id}-g1", "approve", "dave", env={SLOW_ENV: str(marker)}
    )
    deadline = time.monotonic() + 60
    while not marker.exists():  # the resumed run reached its slow suggestor
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the resumed run never reached finish"
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()  # reaped: its pid is gone, so the run can be taken over
    proc.communicate()

    store = open_store(store_url)
    try:
        assert store.run(run_id).status == "crashed"
        recorded = [f.id for f in store.facts(run_id)]
        assert "license.unknown#0" in recorded  # the dead process promoted facts after the gate
        assert store.verify(run_id).ok

        result = make_engine(store).resume_run(run_id)

        expected = uninterrupted(GateDecision.approve(by="dave"), run_id)
        assert result.stop_reason == Converged()
        assert facts_of(result) == expected
        ids = [f.id for f in store.facts(run_id)]
        assert ids == [f["id"] for f in expected]  # every fact promoted exactly once
        assert len(ids) == len(set(ids))
        assert store.run(run_id).status == "stopped"
        assert len(store.events(run_id, kinds=["gate_decided"])) == 1
        resumed = [e.payload.get("from") for e in store.events(run_id, kinds=["run_resumed"])]
        assert resumed == [None, "crash"]
        report = store.verify(run_id)
        assert report.ok, report
    finally:
        store.close()


def test_a_running_run_whose_process_is_alive_cannot_be_taken_over(store: SqlRunStore) -> None:
    run_id, gate_id = pause(store)
    store.decide_gate(gate_id, GateDecision.approve(by="erin"), "approved")
    store.claim_resume(run_id)  # this process holds it now: alive
    with pytest.raises(ResumeError, match="another process"):
        make_engine(store).resume_run(run_id)


# -- bad input: typed errors, the stored run unchanged ---------------------------------


def test_an_unknown_gate_is_gate_not_found_and_changes_nothing(store: SqlRunStore) -> None:
    run_id, _ = pause(store)
    before = state_of(store, run_id)
    with pytest.raises(GateNotFound):
        make_engine(store).resume("no-such-gate", GateDecision.approve(by="x"))
    assert state_of(store, run_id) == before


def test_a_decision_on_an_expired_gate_is_refused_and_the_gate_decided_by_on_timeout(
    store: SqlRunStore,
) -> None:
    with freeze_time("2030-01-01 12:00:00"):
        run_id, gate_id = pause(store, timeout_s=60, on_timeout="reject")
    before = state_of(store, run_id)
    with freeze_time("2030-01-01 12:01:01"), pytest.raises(GateExpired, match="on_timeout"):
        make_engine(store).resume(gate_id, GateDecision.approve(by="late"))
    # the late decision changed nothing; the on_timeout decision entered the chain, once
    status, events, _head = state_of(store, run_id)
    assert (status, events) == (before[0], before[1] + 1)
    (decided,) = store.events(run_id, kinds=["gate_decided"])
    assert decided.payload["status"] == "expired" and decided.payload["by"] == "timeout"
    assert store.verify(run_id).ok
    gate = store.get_gate(gate_id)
    assert gate.status == "expired" and gate.decided_by == "timeout"

    result = make_engine(store).resume_run(run_id)  # goes on with the on_timeout decision

    assert result.stop_reason == Converged()
    assert not result.context.has("license.unknown")
    assert result.context.get("hitl.rejected")[0].content["by"] == "timeout"
    assert store.verify(run_id).ok


def test_a_gate_decided_before_its_timeout_is_not_expired(store: SqlRunStore) -> None:
    with freeze_time("2030-01-01 12:00:00"):
        _, gate_id = pause(store, timeout_s=60, on_timeout="reject")
    with freeze_time("2030-01-01 12:00:59"):
        result = make_engine(store).resume(gate_id, GateDecision.approve(by="quick"))
    assert result.context.has("license.unknown")


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (("scan", "count"), r"missing \['finish'\], extra none"),
        (("scan", "count", "finish", "extra"), r"missing none, extra \['extra'\]"),
    ],
)
def test_resuming_with_other_suggestors_is_a_resume_error_naming_them(
    store: SqlRunStore, names: tuple[str, ...], message: str
) -> None:
    run_id, gate_id = pause(store)
    before = state_of(store, run_id)
    from engine import FunctionSuggestor

    engine = Engine(gates=[require_approval(keys=["license.unknown"])], store=store)
    by_name = {s.name: s for s in SUGGESTORS}
    engine.register(
        *(
            by_name.get(n) or FunctionSuggestor(lambda ctx: None, n, dependencies=["x"])
            for n in names
        )
    )
    with pytest.raises(ResumeError, match=message):
        engine.resume(gate_id, GateDecision.approve(by="x"))
    assert state_of(store, run_id) == before
    assert store.get_gate(gate_id).status == "pending"  # still decidable


@pytest.mark.parametrize("garbage", ["{not json", "[1, 2]", '{"version": 1, "run_id": "x"}'])
def test_a_corrupted_checkpoint_is_a_resume_error_and_changes_nothing(
    store: SqlRunStore, garbage: str
) -> None:
    run_id, gate_id = pause(store)
    raw = create_engine(store.url)
    try:
        with raw.begin() as conn:
            conn.execute(
                text("UPDATE checkpoints SET data = :d WHERE run_id = :r"),
                {"d": garbage, "r": run_id},
            )
    finally:
        raw.dispose()
    before = state_of(store, run_id)
    with pytest.raises(ResumeError):
        make_engine(store).resume(gate_id, GateDecision.approve(by="x"))
    assert state_of(store, run_id) == before
    assert store.get_gate(gate_id).status == "pending"


def test_resume_run_refuses_a_run_waiting_on_a_pending_gate(store: SqlRunStore) -> None:
    run_id, gate_id = pause(store)
    before = state_of(store, run_id)
    with pytest.raises(ResumeError, match=f"waits on gate {gate_id}"):
        make_engine(store).resume_run(run_id)
    assert state_of(store, run_id) == before


# -- a criterion blocked on a human ----------------------------------------------------


def test_a_criterion_blocked_on_a_human_stops_with_human_intervention_required(
    store: SqlRunStore,
) -> None:
    run_id = new_run_id()
    engine = Engine(criteria=[signed_off], store=store)
    engine.register(scan, count)

    result = engine.run(INITIAL, run_id=run_id)

    assert result.stop_reason == HumanInterventionRequired(
        criteria=["signed_off"], approval_refs=["ticket-7"]
    )
    assert result.stop_reason.exit_code == 11
    row = store.run(run_id)
    assert row.status == "stopped"
    assert row.kind == "human_intervention_required" and row.category == "human"
    assert row.stop_reason == result.stop_reason
    assert store.runs(category="human")[0].run_id == run_id
    assert kinds(store, run_id)[-1] == "run_stopped"
    assert store.verify(run_id).ok


class StaleGateRead:
    """A store whose first ``get_gate`` answers what a slower racer read earlier."""

    def __init__(self, store: SqlRunStore, stale: Any) -> None:
        self._store = store
        self._stale: Any = stale

    def get_gate(self, gate_id: str) -> Any:
        if self._stale is not None:
            stale, self._stale = self._stale, None
            return stale
        return self._store.get_gate(gate_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def test_a_racer_that_read_the_gate_before_the_winner_finished_gets_gate_already_decided(
    store: SqlRunStore,
) -> None:
    run_id, gate_id = pause(store)
    pending = store.get_gate(gate_id)
    winner = make_engine(store).resume(gate_id, GateDecision.approve(by="fast"))
    assert isinstance(winner.stop_reason, Converged)  # the run's checkpoint is gone now
    before = (store.run(run_id).last_seq, store.run(run_id).head_hash)

    slow = make_engine(StaleGateRead(store, pending))  # type: ignore[arg-type]
    with pytest.raises(GateAlreadyDecided) as info:
        slow.resume(gate_id, GateDecision.approve(by="slow"))
    assert info.value.by == "fast"
    assert (store.run(run_id).last_seq, store.run(run_id).head_hash) == before
