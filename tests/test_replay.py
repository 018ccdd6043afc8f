"""Replay (issue 24): re-execute a recorded run with its recorded model responses.

The LLM license reviewer (examples/dependency_audit/reviewed.yaml and its Python
form) and a job of three agents with tools replay without calling any model
(pydantic-ai's ``ALLOW_MODEL_REQUESTS`` is False, and the replay's models fail
the test if asked) and reproduce every fact and the stop, through a gate decided
by a person too; a changed suggestor, a changed tool or a changed prompt is named
with its cycle; ``--live`` calls the models and reports instead of failing;
non-deterministic suggestors are played back from their recorded outputs; the
recorded store is never written; ``converge replay``'s exit codes and JSON.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import models
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    TextPart,
    ThinkingPart,
    ToolCallPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage
from sqlalchemy import select, update
from typer.testing import CliRunner

from audit import SqlRunStore, open_store
from audit.tables import audit_events
from converge.agents.tape import response_json, response_of
from converge.cli import app
from converge.errors import JobFileError, ReplayError
from converge.jobs import parse_job
from converge.timetravel import Divergence, ReplayReport, replay_run
from engine import Budget, CriteriaMet, Engine, GateDecision, HitlGatePending, RunNotFound, RunStore
from engine.facts import Fact
from examples.dependency_audit.reviewer import REVIEWER
from tests.hitlfixtures import opened_store
from tests.keyfixtures import rechain
from tests.replayjobs import (
    CALLED,
    USAGE,
    chain,
    forbidden,
    grade_v2,
    job_text,
    live_models,
    no_model,
    publish,
    publish_v2,
    reviewer_engine,
    reviewer_initial,
    said,
    silent,
    stamp,
    three_agents,
)
from tests.test_agents_license_reviewer import (
    VENDORED_MIT,
    ambiguous_component,
    scripted_reviewer,
)

ROOT = Path(__file__).resolve().parent.parent
REVIEWED = ROOT / "examples" / "dependency_audit" / "reviewed.yaml"

pytestmark = pytest.mark.usefixtures("no_model_requests")


@pytest.fixture(autouse=True)
def _no_calls_yet() -> Iterator[None]:
    CALLED.clear()
    yield


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[SqlRunStore]:
    yield from opened_store("sqlite", tmp_path)


def test_three_agents_with_tools_replay_without_calling_a_model(store: SqlRunStore) -> None:
    recorded = three_agents(store).run({"topic": ["replay", "fork"]})
    assert recorded.stop_reason.kind_code() == "converged"
    assert recorded.usage.total_tokens > 0 and recorded.context.has("published")
    before = chain(store, recorded.run_id)
    assert models.ALLOW_MODEL_REQUESTS is False  # the no_model_requests fixture
    report = replay_run(store, recorded.run_id, no_model)
    assert CALLED == []
    assert report.same, report.divergences
    assert report.first_divergence is None
    assert report.model_responses == 6  # two requests (tool call, answer) per agent
    assert report.expected_stop == report.got_stop
    assert report.got_stop is not None
    assert report.got_stop["reason"] == {"kind": "converged"}
    assert report.cycles == (recorded.cycles, recorded.cycles)
    assert report.facts == (len(recorded.context), len(recorded.context))
    assert report.facts_root[0] == report.facts_root[1] == store.run(recorded.run_id).facts_root
    assert chain(store, recorded.run_id) == before  # the recorded run is only read
    assert store.verify(recorded.run_id).ok


def _diverged(
    store: SqlRunStore, key: str, **changed: Any
) -> tuple[Fact, Divergence, ReplayReport]:
    """The recorded three-agent run's one ``key`` fact, the first divergence of its
    replay with ``changed`` parts (:func:`three_agents`' keywords) and the report;
    asserts no model was called and that the replay diverged."""
    recorded = three_agents(store).run({"topic": ["replay"]})
    [fact] = recorded.context.get(key)
    report = replay_run(store, recorded.run_id, lambda s: three_agents(s, silent(), **changed))
    assert CALLED == []
    first = report.first_divergence
    assert first is not None and not report.same
    return fact, first, report


def test_a_changed_suggestor_is_named_with_the_first_cycle_it_changed(
    sqlite_store: SqlRunStore,
) -> None:
    fact, first, report = _diverged(sqlite_store, "published", publisher=publish_v2)
    assert (first.kind, first.cycle, first.suggestor) == ("fact", fact.provenance.cycle, "publish")
    assert first.expected["content"] == fact.content
    assert first.got["content"] == {**fact.content, "score": 2 * fact.content["score"]}
    assert first.expected["id"] == first.got["id"] == fact.id
    assert report.exit_code() == 1


def test_a_changed_tool_is_named_as_the_request_its_agent_sends(
    sqlite_store: SqlRunStore,
) -> None:
    verdict, first, _ = _diverged(sqlite_store, "verdict", critic_tool=grade_v2)
    assert (first.kind, first.cycle, first.suggestor) == (
        "request",
        verdict.provenance.cycle,
        "critic",
    )
    assert "request 2 of agent run 1" in first.message  # the tool's result went back
    assert first.expected != first.got


def test_live_replay_calls_the_models_and_reports_what_they_answer_now(
    sqlite_store: SqlRunStore,
) -> None:
    recorded = three_agents(sqlite_store).run({"topic": ["replay"]})
    asked: list[int] = []

    def other_critic(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        asked.append(len(messages))
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("grade", {"text": "x"})], usage=USAGE)
        args = {"score": 6, "ok": True}
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, args)], usage=USAGE)

    same = replay_run(sqlite_store, recorded.run_id, three_agents, live=True)
    assert same.live and same.same and same.model_responses == 0
    models = {**live_models(), "critic": FunctionModel(other_critic)}
    report = replay_run(sqlite_store, recorded.run_id, lambda s: three_agents(s, models), live=True)
    assert asked  # the critic's model was called
    assert not report.same and report.exit_code() == 0  # reported, not failed
    first = report.first_divergence
    assert first is not None and (first.kind, first.suggestor) == ("fact", "critic")
    assert first.got["content"] == {"score": 6, "ok": True}
    assert same.models[0] == same.models[1] and not same.other_models


# -- the LLM license reviewer ---------------------------------------------------------------
def test_the_license_reviewer_replays_its_review_without_the_model(
    sqlite_store: SqlRunStore,
) -> None:
    recorded = reviewer_engine(sqlite_store, FunctionModel(scripted_reviewer)).run(
        reviewer_initial(VENDORED_MIT)
    )
    assert isinstance(recorded.stop_reason, CriteriaMet)
    report = replay_run(
        sqlite_store, recorded.run_id, lambda s: reviewer_engine(s, FunctionModel(forbidden))
    )
    assert CALLED == []
    assert report.same, report.divergences
    assert report.model_responses == 1


@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_the_license_reviewer_replays_through_the_gate_a_person_decided(
    store: SqlRunStore, tmp_path: Path, decision: str
) -> None:
    engine = reviewer_engine(store, FunctionModel(scripted_reviewer))
    paused = engine.run(reviewer_initial(ambiguous_component(tmp_path)))
    reason = paused.stop_reason
    assert isinstance(reason, HitlGatePending) and reason.agent_id == REVIEWER
    if decision == "approve":
        done = engine.resume(reason.gate_id, GateDecision.approve(by="alice"))
    else:
        done = engine.resume(reason.gate_id, GateDecision.reject(by="bob", reason="BSD-3-Clause"))
    assert isinstance(done.stop_reason, CriteriaMet)
    report = replay_run(store, done.run_id, lambda s: reviewer_engine(s, FunctionModel(forbidden)))
    assert CALLED == []
    assert report.same, report.divergences
    assert report.got_stop == report.expected_stop
    assert report.facts == (len(done.context), len(done.context))


def test_the_reviewed_job_file_replays_from_the_command_line_without_a_model(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Recorded with the offline TestModel; replayed with an OpenAI model that
    could not be asked (ALLOW_MODEL_REQUESTS is False, the key is a placeholder)."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("CONVERGE_MODEL", "test")
    db = ["--db", str(tmp_path / "runs.db")]
    runner = CliRunner()
    ran = runner.invoke(app, ["run", str(REVIEWED), "--json", *db])
    assert ran.exit_code == 10, ran.output
    reason = json.loads(ran.stdout)["stop_reason"]
    assert reason["agent_id"] == REVIEWER
    approved = runner.invoke(app, ["approve", reason["gate_id"], "--by", "alice", *db])
    assert approved.exit_code == 0, approved.output
    run_id = reason["gate_id"].rsplit("-g", 1)[0]
    monkeypatch.setenv("CONVERGE_MODEL", "openai:gpt-4o-mini")
    monkeypatch.setenv("OPENAI_API_KEY", "not-a-key")
    assert models.ALLOW_MODEL_REQUESTS is False
    replayed = runner.invoke(app, ["replay", run_id[:8], "--json", *db])
    assert replayed.exit_code == 0, replayed.output
    report = json.loads(replayed.stdout)
    assert report["same"] is True and report["first_divergence"] is None
    assert report["model_responses"] == 1
    assert report["expected_stop"]["reason"]["kind"] == "criteria_met"
    assert report["cycles"]["recorded"] == report["cycles"]["replayed"]
    assert report["facts"]["recorded"] == report["facts"]["replayed"] > 0
    text = runner.invoke(app, ["replay", run_id, *db], terminal_width=200)
    assert text.exit_code == 0, text.output
    assert "same: every cycle promoted the same facts" in text.stdout


# -- job files and the command line ---------------------------------------------------------
def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.fixture
def recorded_job(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[list[str], str]:
    """A run of the three-agent job file on the offline TestModel: ``--db`` and its id."""
    monkeypatch.setenv("CONVERGE_MODEL", "test")
    db = ["--db", str(tmp_path / "runs.db")]
    job = _write(tmp_path, "job.yaml", job_text())
    ran = CliRunner().invoke(app, ["run", job, "--json", *db])
    assert ran.exit_code == 0, ran.output
    # from now on no model can answer: a replay that asks one fails
    monkeypatch.setenv("CONVERGE_MODEL", "openai:gpt-4o-mini")
    monkeypatch.setenv("OPENAI_API_KEY", "not-a-key")
    return db, json.loads(ran.stdout)["run_id"]


def test_converge_replay_exits_0_when_the_job_replays_the_same(
    recorded_job: tuple[list[str], str],
) -> None:
    db, run_id = recorded_job
    res = CliRunner().invoke(app, ["replay", run_id, "--json", *db])
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert set(report) == {
        "run_id",
        "live",
        "job",
        "same",
        "models",
        "expected_stop",
        "got_stop",
        "cycles",
        "facts",
        "facts_root",
        "model_responses",
        "played_back",
        "redacted",
        "first_divergence",
        "divergences",
    }
    assert (report["run_id"], report["job"], report["live"]) == (run_id, "three-agents", False)
    assert report["same"] is True and report["divergences"] == []
    assert report["model_responses"] == 6
    assert report["played_back"] == ["stamp", "sampler"]
    assert report["facts_root"]["recorded"] == report["facts_root"]["replayed"]


def _replayed_diverging(
    recorded_job: tuple[list[str], str], tmp_path: Path, **changes: str
) -> tuple[dict[str, Any], str]:
    """``converge replay RUN --job CHANGED --json`` of the recorded job's run, CHANGED
    its job file with ``changes`` (:func:`job_text`'s); it must exit 1: its JSON's
    ``first_divergence`` and CHANGED's path."""
    db, run_id = recorded_job
    changed = _write(tmp_path, "changed.yaml", job_text(**changes))
    res = CliRunner().invoke(app, ["replay", run_id, "--job", changed, "--json", *db])
    assert res.exit_code == 1, res.output
    first: dict[str, Any] = json.loads(res.stdout)["first_divergence"]
    return first, changed


def test_converge_replay_exits_1_naming_the_first_divergent_cycle_and_suggestor(
    recorded_job: tuple[list[str], str], tmp_path: Path
) -> None:
    db, run_id = recorded_job
    first, changed = _replayed_diverging(recorded_job, tmp_path, summary_ref="summary_v2")
    assert (first["kind"], first["cycle"], first["suggestor"]) == ("fact", 3, "summary")
    assert first["expected"]["content"] == {"notes": 1, "drafts": 1}
    assert first["got"]["content"] == {"notes": 1, "drafts": -1}
    assert set(first) == {"kind", "cycle", "suggestor", "expected", "got", "message"}
    text = CliRunner().invoke(app, ["replay", run_id, "--job", changed, *db], terminal_width=200)
    assert text.exit_code == 1
    assert "first divergence: cycle 3, suggestor summary (fact)" in text.stdout


def test_converge_replay_live_reports_a_divergence_and_exits_0(
    recorded_job: tuple[list[str], str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, run_id = recorded_job
    monkeypatch.setenv("CONVERGE_MODEL", "test")
    res = CliRunner().invoke(app, ["replay", run_id, "--live", "--json", *db])
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["live"] is True and report["model_responses"] == 0
    # stamp and sampler ran for real: new numbers
    assert not report["same"]
    assert report["first_divergence"]["suggestor"] in ("stamp", "sampler")
    assert report["first_divergence"]["cycle"] == 1


def test_converge_replay_of_a_changed_tool_names_the_agent(
    recorded_job: tuple[list[str], str], tmp_path: Path
) -> None:
    first, _ = _replayed_diverging(recorded_job, tmp_path, tool="grade_v2")
    assert (first["kind"], first["cycle"], first["suggestor"]) == ("request", 3, "critic")


def test_converge_replay_exits_2_when_the_run_cannot_be_replayed(
    tmp_path: Path, sqlite_store: SqlRunStore
) -> None:
    recorded = three_agents(sqlite_store).run({"topic": ["replay"]})  # no job recorded
    db = ["--db", str(tmp_path / "hitl.db")]
    assert Path(db[1]).exists()
    res = CliRunner().invoke(app, ["replay", recorded.run_id, *db])
    assert res.exit_code == 2
    assert "recorded no job" in res.stderr
    missing = CliRunner().invoke(app, ["replay", "nosuchrun", *db])
    assert missing.exit_code == 2


# -- what replay needs recorded -------------------------------------------------------------
def test_non_deterministic_suggestors_are_played_back_from_their_recorded_proposals(
    sqlite_store: SqlRunStore,
) -> None:
    def engine(store: RunStore) -> Engine:
        return Engine(store=store).register(stamp, publish)

    recorded = engine(sqlite_store).run({"topic": ["x"]})
    [event] = [
        e
        for e in sqlite_store.events(recorded.run_id, kinds=["suggestor_executed"])
        if e.payload["suggestor"] == "stamp"
    ]
    [fact] = recorded.context.get("stamp")
    assert event.payload["effect"] == {
        "proposals": [
            {"key": "stamp", "content": fact.content, "confidence": 1.0, "parents": [], "id": None}
        ]
    }
    offline = replay_run(sqlite_store, recorded.run_id, engine)
    assert offline.same and offline.played_back == ("stamp",)
    live = replay_run(sqlite_store, recorded.run_id, engine, live=True)
    assert live.first_divergence is not None
    assert (live.first_divergence.suggestor, live.first_divergence.cycle) == ("stamp", 1)


def test_a_job_files_nondeterministic_names_must_be_its_suggestors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CONVERGE_MODEL", "test")
    job = parse_job(job_text().replace("[sampler]", "[sampler, samplr]"), "j.yaml")
    with pytest.raises(JobFileError) as err:
        job.build_engine()
    assert "j.yaml:3" in str(err.value)
    assert "nondeterministic.1: no suggestor or agent 'samplr'" in str(err.value)
    assert "did you mean 'sampler'" in str(err.value)
    engine = parse_job(job_text(), "j.yaml").build_engine()
    marked = dict(zip(engine.registry.names, engine.registry.records_effect, strict=True))
    assert marked == {
        "summary": False,
        "stamp": True,
        "sampler": True,
        "researcher": False,
        "writer": False,
        "critic": False,
    }


def test_a_run_recorded_without_model_responses_names_the_agent_it_cannot_answer(
    sqlite_store: SqlRunStore, tmp_path: Path
) -> None:
    recorded = three_agents(sqlite_store).run({"topic": ["replay"]})
    with sqlite_store.transaction() as conn:  # as a store written before responses were recorded
        rows = conn.execute(
            select(audit_events.c.seq, audit_events.c.payload).where(
                audit_events.c.run_id == recorded.run_id,
                audit_events.c.kind == "suggestor_executed",
            )
        ).all()
        for seq, payload in rows:
            data = json.loads(payload)
            data.pop("responses", None)
            conn.execute(
                update(audit_events)
                .where(audit_events.c.run_id == recorded.run_id, audit_events.c.seq == seq)
                .values(payload=json.dumps(data))
            )
    rechain(str(tmp_path / "hitl.db"), recorded.run_id, None)  # as that store chained it
    report = replay_run(sqlite_store, recorded.run_id, no_model)
    assert CALLED == []
    first = report.first_divergence
    assert first is not None
    assert (first.kind, first.cycle, first.suggestor) == ("unrecorded", 1, "researcher")
    assert "no recorded response" in first.message
    live = replay_run(sqlite_store, recorded.run_id, three_agents, live=True)
    assert live.same


def test_a_fork_is_not_replayed_on_its_own(sqlite_store: SqlRunStore) -> None:
    parent = Engine(budget=Budget(max_cycles=2), store=sqlite_store)
    parent.register(stamp, publish)
    first = parent.run({"topic": ["x"]})
    fork = Engine(budget=Budget(max_cycles=5), store=sqlite_store).register(stamp, publish)
    forked = fork.fork(first.run_id, 1)
    with pytest.raises(ReplayError, match=f"fork of {first.run_id} at cycle 1"):
        replay_run(sqlite_store, forked.run_id, lambda s: Engine(store=s))
    with pytest.raises(RunNotFound):
        replay_run(sqlite_store, "no-such-run")


def test_replay_never_writes_the_recorded_store(tmp_path: Path) -> None:
    path = tmp_path / "ro.db"
    writable = open_store(str(path))
    recorded = three_agents(writable).run({"topic": ["a", "b"]})
    writable.close()
    path.chmod(0o444)  # a write would fail
    try:
        readonly = open_store(str(path), read_only=True)
        report = replay_run(readonly, recorded.run_id, no_model)
        readonly.close()
    finally:
        path.chmod(0o644)
    assert report.same, report.divergences


@pytest.mark.parametrize(
    "response",
    [
        ModelResponse(parts=[TextPart("seen 1")], usage=USAGE, model_name="m"),
        ModelResponse(
            parts=[
                ToolCallPart("final_result", {"a": [1, {"b": None}]}, tool_call_id="call-1"),
                TextPart("t", id="part-1"),
            ],
            usage=RequestUsage(input_tokens=5, output_tokens=7, cost=Decimal("0.00001275")),
            model_name="gpt",
            provider_name="openai",
            provider_details={"finish": "stop"},
            finish_reason="stop",
        ),
        ModelResponse(parts=[ThinkingPart("hmm"), ToolCallPart("f", '{"a": 1}')], usage=USAGE),
    ],
    ids=["text", "tool-call", "thinking"],
)
def test_a_recorded_response_is_pydantic_ais_json_without_timestamps_and_ids(
    response: ModelResponse,
) -> None:
    recorded = response_json(response)
    adapter = ModelMessagesTypeAdapter.dump_python([response], mode="json")[0]
    assert "timestamp" not in recorded
    assert all("tool_call_id" not in p for p in recorded["parts"])
    assert {k: v for k, v in recorded.items() if k != "parts"} == {
        k: v
        for k, v in adapter.items()
        if v is not None and k not in ("timestamp", "parts", "usage", "run_id", "conversation_id")
    } | {"usage": {k: v for k, v in adapter["usage"].items() if v}}
    back = response_of(recorded)
    assert said(back) == said(response)
    assert back.usage == response.usage and back.model_name == response.model_name
