"""A redacted run replayed and streamed (issue 56): ``replay_run`` / ``converge
replay`` compare a redacted fact without its content and name the redaction, and
``GET /api/runs/{id}/events`` (through the real ``converge serve``) sends the
marker, ends after the ``fact_redacted`` chained after the stop, and never the
erased content. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from audit import SqlRunStore, open_store, redact_fact
from audit.people import add_token
from converge.cli import app
from converge.timetravel import replay_run
from engine import Context, Engine, Proposal, RunStore, suggestor
from engine.hashing.commitment import redaction_note
from tests import redactionfixtures
from tests.realserve import served_cli
from tests.redactionfixtures import REASON
from tests.replayjobs import job_text
from tests.test_live_runs import DEADLINE_S, Received, listen
from tests.test_redaction import INITIAL, SECRET, _engine, _fact_id

# the shared fixtures, by name
store = redactionfixtures.store
url = redactionfixtures.url


def _redacted_run(store: SqlRunStore) -> tuple[str, str, str]:
    """A stopped run of format 2, its e-mail (promoted) and contact (initial) facts
    redacted by alice: its id and theirs."""
    run_id = _engine(store).run(INITIAL).run_id
    email, contact = (_fact_id(store, run_id, k) for k in ("email", "contact"))
    for fact_id in (email, contact):
        redact_fact(store, run_id, fact_id, by="alice", reason=REASON)
    return run_id, email, contact


def test_a_replay_of_a_redacted_run_is_the_same_and_never_shows_the_content(
    store: SqlRunStore,
) -> None:
    run_id, email, contact = _redacted_run(store)
    report = replay_run(store, run_id, _engine)  # find computes the erased content again
    assert report.same, report.divergences
    assert {n.split(": ", 1)[0] for n in report.redacted} == {email, contact}
    assert all(": redacted by alice at " in n and n.endswith(REASON) for n in report.redacted)
    assert SECRET not in json.dumps(report.to_dict())


@suggestor(name="find", dependencies=["seed"])
def find_less(ctx: Context) -> list[Proposal]:
    """``find`` without the e-mail: the replay parts from the recording there."""
    return [Proposal("answer", "yes"), Proposal("package", "a")]


def _less(store: RunStore) -> Engine:
    engine = Engine(store=store)
    engine.register(find_less)
    return engine


def test_a_replay_that_differs_at_a_redacted_fact_names_the_redaction(
    store: SqlRunStore,
) -> None:
    run_id, email, _ = _redacted_run(store)
    report = replay_run(store, run_id, _less)
    first = report.first_divergence
    assert first is not None and first.kind == "fact"
    assert email in first.message and "its content is not compared: redacted by alice" in (
        first.message
    )
    assert SECRET not in json.dumps(report.to_dict())


def test_converge_replay_of_a_redacted_job_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CONVERGE_MODEL", "test")
    monkeypatch.setenv("CONVERGE_CHAIN_FORMAT", "2")
    db = str(tmp_path / "runs.db")
    job = tmp_path / "job.yaml"
    job.write_text(job_text(), "utf-8")
    ran = CliRunner().invoke(app, ["run", str(job), "--json", "--db", db])
    assert ran.exit_code == 0, ran.output
    run_id = json.loads(ran.stdout)["run_id"]
    s = open_store(db)
    try:
        fact = [f for f in s.facts(run_id) if f.provenance.cycle > 0][-1]  # promoted
        secret = json.dumps(fact.content)
        redact_fact(s, run_id, fact.id, by="alice", reason=REASON)
    finally:
        s.close()
    monkeypatch.setenv("CONVERGE_MODEL", "openai:gpt-4o-mini")  # no model may answer
    monkeypatch.setenv("OPENAI_API_KEY", "not-a-key")
    res = CliRunner().invoke(app, ["replay", run_id, "--json", "--db", db])
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["same"] is True and report["redacted"][0].startswith(f"{fact.id}: redacted by")
    assert secret not in res.stdout
    text = CliRunner().invoke(app, ["replay", run_id, "--db", db])
    assert text.exit_code == 0, text.output
    assert f"redacted fact {fact.id}: redacted by alice at " in text.stdout
    assert secret not in text.stdout


def test_the_stream_of_a_redacted_run_sends_the_marker_and_ends(
    store: SqlRunStore, url: str, tmp_path: Path
) -> None:
    run_id, email, contact = _redacted_run(store)
    bearer = {"Authorization": f"Bearer {add_token(store, 'victor', 'viewer')}"}
    last = store.run(run_id).last_seq
    with served_cli(url, tmp_path / "serve.log") as served:
        got = Received()
        listen(f"{served.base}/api/runs/{run_id}/events", bearer, got).join(DEADLINE_S)
        assert got.ended.is_set(), "the stream of a redacted run did not end"
        again = Received()
        listen(f"{served.base}/api/runs/{run_id}/events?after={last}", bearer, again).join(
            DEADLINE_S
        )
    assert got.status == 200 and again.status == 204
    assert [e[0] for e in got.events][-1] == last
    assert got.kinds()[-2:] == ["fact_redacted", "fact_redacted"]
    wire = json.dumps([e[2] for e in got.events])
    assert SECRET not in wire
    promoted = [e[2] for e in got.events if e[1] == "fact_promoted"]
    (mark,) = [p["payload"]["content"] for p in promoted if p["payload"]["id"] == email]
    note = redaction_note(mark)
    assert note is not None and note.startswith("redacted by alice at ") and note.endswith(REASON)
    (started,) = [e[2] for e in got.events if e[1] == "run_started"]
    (initial,) = [f for f in started["payload"]["initial_facts"] if f["id"] == contact]
    assert (redaction_note(initial["content"]) or "").endswith(f": {REASON}")
