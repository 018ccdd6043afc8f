"""A page of gates reads each run's job and comments once and every gate's votes in
one query, not three reads per gate."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import converge.web.views as views
from audit import open_store
from audit.people import add_comment, cast_vote
from audit.store import SqlRunStore
from converge.web.views import gates_list, run_page_data
from engine import Context, Engine, GateDecision, Proposal, suggestor
from gates import require_approval
from tests.webfixtures import quorum_job, run_job


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlRunStore]:
    s = open_store(str(tmp_path / "audit.db"))
    yield s
    s.close()


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Any]]:
    """The reads the gate views make, by what they read."""
    seen: dict[str, list[Any]] = {"jobs": [], "comments": [], "votes": []}
    job_of_run, run_comments, votes_on = views.job_of_run, views.run_comments, views.votes_on

    def job(store: SqlRunStore, run_id: str) -> Any:
        seen["jobs"].append(run_id)
        return job_of_run(store, run_id)

    def comments(store: SqlRunStore, run_id: str) -> Any:
        seen["comments"].append(run_id)
        return run_comments(store, run_id)

    def votes(store: SqlRunStore, gate_ids: list[str], *corrupt: Any) -> Any:
        seen["votes"].append(list(gate_ids))
        return votes_on(store, gate_ids, *corrupt)

    monkeypatch.setattr(views, "job_of_run", job)
    monkeypatch.setattr(views, "run_comments", comments)
    monkeypatch.setattr(views, "votes_on", votes)
    return seen


def test_a_page_of_gates_reads_each_run_once_and_the_votes_in_one_query(
    store: SqlRunStore, reads: dict[str, list[Any]]
) -> None:
    job = quorum_job(2)
    runs = [run_job(job, store) for _ in range(3)]
    gates = [r.stop_reason.gate_id for r in runs]  # type: ignore[attr-defined]
    cast_vote(store, gates[0], GateDecision.approve(by="ana"), 2)
    add_comment(store, gates[1], "bo", "looks fine")

    listed = gates_list(store, None)

    assert sorted(g["gate_id"] for g in listed) == sorted(gates)
    by_id = {g["gate_id"]: g for g in listed}
    assert [v["by"] for v in by_id[gates[0]]["approvals"]] == ["ana"]
    assert [c["text"] for c in by_id[gates[1]]["comments"]] == ["looks fine"]
    assert by_id[gates[2]]["approvals"] == [] and by_id[gates[2]]["comments"] == []
    assert all(g["approvals_required"] == 2 for g in listed)  # each run's job was read
    assert sorted(reads["jobs"]) == sorted(r.run_id for r in runs)
    assert sorted(reads["comments"]) == sorted(r.run_id for r in runs)
    assert len(reads["votes"]) == 1 and sorted(reads["votes"][0]) == sorted(gates)


@suggestor(name="scan", dependencies=["seed"])
def scan(ctx: Context) -> list[Proposal]:
    return [Proposal("license.unknown", {"name": "a"}), Proposal("license.unknown", {"name": "b"})]


def test_a_run_page_reads_its_job_and_comments_once_for_all_its_gates(
    store: SqlRunStore, reads: dict[str, list[Any]]
) -> None:
    engine = Engine(gates=[require_approval(keys=["license.unknown"])], store=store)
    first = engine.register(scan).run({"seed": [1]})
    gate_a = first.stop_reason.gate_id  # type: ignore[attr-defined]
    add_comment(store, gate_a, "bo", "one")
    second = engine.resume(gate_a, GateDecision.approve(by="ana"))
    gate_b = second.stop_reason.gate_id  # type: ignore[attr-defined]
    add_comment(store, gate_b, "cy", "two")

    page = run_page_data(store, first.run_id)

    assert {g["gate_id"]: [c["text"] for c in g["comments"]] for g in page["gates"]} == {
        gate_a: ["one"],
        gate_b: ["two"],
    }
    assert reads["jobs"] == [first.run_id] and reads["comments"] == [first.run_id]
    assert len(reads["votes"]) == 1
