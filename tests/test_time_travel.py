"""Time travel (issue 24): fork a recorded run at a cycle, diff two runs.

On SQLite and PostgreSQL (``tests.hitlfixtures.STORES``): a fork at cycle N of a
budget-stopped run, given a larger budget, reaches the stop and facts root of an
uninterrupted run with that budget (a property over N and two jobs); a fork with
one suggestor replaced changes only what that suggestor touched, and the diff
lists exactly that; forks leave their parent verifying and unchanged, verify
themselves and chain their link to the parent; a cycle the store cannot rebuild
is a ForkError. ``converge fork`` / ``converge diff`` / ``converge show`` too.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete, select
from typer.testing import CliRunner

from audit.queries import ForkLink, fork_link, forks_of
from audit.store import SqlRunStore
from audit.tables import audit_events
from converge.cli import app
from converge.timetravel import diff_runs, snapshot
from engine import Budget, Context, Engine, Proposal, RunNotFound, suggestor
from engine.facts import canonical_json
from engine.fork import ForkError, UnverifiedParent
from engine.hashing.merkle import RFC6962, MerkleFrontier, facts_root
from examples.oscillator import ping, pong

OSCILLATOR = Path(__file__).resolve().parent.parent / "examples" / "oscillator" / "job.yaml"


@suggestor(name="count", dependencies=["n"])
def count(ctx: Context) -> list[Proposal]:
    """n, n+1, ... up to 6: the job converges after six cycles."""
    n = int(ctx.get("n")[-1].content)
    return [Proposal("n", n + 1)] if n < 6 else []


@suggestor(name="square", dependencies=["n"])
def square(ctx: Context) -> list[Proposal]:
    """The square of the last n."""
    return [Proposal("square", int(ctx.get("n")[-1].content) ** 2)]


@suggestor(name="label", dependencies=["n"])
def label(ctx: Context) -> list[Proposal]:
    """A label of the last n."""
    return [Proposal("label", f"n={ctx.get('n')[-1].content}")]


@suggestor(name="label", dependencies=["n"])
def label_v2(ctx: Context) -> list[Proposal]:
    """The replacement of ``label``: another text for the same n."""
    return [Proposal("label", f"#{ctx.get('n')[-1].content}")]


JOBS: dict[str, tuple[tuple[Any, ...], dict[str, list[Any]]]] = {
    "oscillator": ((ping, pong), {"ping": [0]}),
    "counter": ((count, square, label), {"n": [0]}),
}
"""Deterministic jobs: their suggestors and initial facts."""


def _engine(store: SqlRunStore, suggestors: tuple[Any, ...], max_cycles: int) -> Engine:
    engine = Engine(budget=Budget(max_cycles=max_cycles), store=store)
    engine.register(*suggestors)
    return engine


def _root_up_to(store: SqlRunStore, run_id: str, cycle: int) -> str:
    facts = [f for f in store.facts(run_id) if f.provenance.cycle <= cycle]
    return facts_root(facts, RFC6962)


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    job=st.sampled_from(sorted(JOBS)),
    stopped_at=st.integers(min_value=1, max_value=4),
    data=st.data(),
)
def test_a_fork_with_a_larger_budget_reaches_the_stop_of_an_uninterrupted_run(
    store: SqlRunStore, job: str, stopped_at: int, data: st.DataObject
) -> None:
    suggestors, initial = JOBS[job]
    n = data.draw(st.integers(min_value=0, max_value=stopped_at), label="fork at cycle")
    larger = data.draw(st.integers(min_value=stopped_at + 1, max_value=9), label="max_cycles")
    parent = _engine(store, suggestors, stopped_at).run(initial)
    assert parent.stop_reason.kind_code() == "cycle_budget_exhausted"
    whole = _engine(store, suggestors, larger).run(initial)
    forked = _engine(store, suggestors, larger).fork(parent.run_id, n)
    assert forked.run_id not in (parent.run_id, whole.run_id)
    assert forked.stop_reason == whole.stop_reason
    assert store.run(forked.run_id).facts_root == store.run(whole.run_id).facts_root
    assert [(f.id, f.content, f.provenance) for f in forked.context] == [
        (f.id, f.content, f.provenance) for f in whole.context
    ]


def test_a_fork_with_one_suggestor_replaced_changes_only_what_it_touched(
    store: SqlRunStore,
) -> None:
    parent = _engine(store, (count, square, label), 20).run({"n": [0]})
    assert parent.stop_reason.kind_code() == "converged"
    fork = _engine(store, (count, square, label_v2), 20).fork(parent.run_id, 2)
    assert fork.stop_reason.kind_code() == "converged"
    diff = diff_runs(snapshot(store, parent.run_id), snapshot(store, fork.run_id))
    # label's facts of cycles 3.. differ; nothing else does
    touched = [f for f in parent.context if f.key == "label" and f.provenance.cycle > 2]
    assert touched
    assert [(a.id, a.content, b.content) for a, b in diff.changed] == [
        (f.id, f.content, f"#{f.content.removeprefix('n=')}") for f in touched
    ]
    assert diff.only_a == () and diff.only_b == ()
    assert diff.common == len(parent.context) - len(touched)
    assert diff.diverged_at == 3
    assert any("fork of the other run at cycle 2" in w for w in diff.why)
    assert any(w.startswith("same stop: converged") for w in diff.why)
    as_json = diff.to_dict()
    assert {c["key"] for c in as_json["facts"]["changed"]} == {"label"}
    assert as_json["same"] is False and as_json["same_stop"] is True


def test_forks_leave_the_parent_verifying_and_chain_their_link(store: SqlRunStore) -> None:
    parent = _engine(store, (ping, pong), 4).run({"ping": [0]})
    before = store.run(parent.run_id)
    forks = [_engine(store, (ping, pong), 8).fork(parent.run_id, n) for n in (0, 2, 4)]
    after = store.run(parent.run_id)
    assert (after.last_seq, after.head_hash) == (before.last_seq, before.head_hash)
    assert store.verify(parent.run_id).ok
    for n, fork in zip((0, 2, 4), forks, strict=True):
        report = store.verify(fork.run_id)
        assert report.ok, report
        started = store.events(fork.run_id)[0]
        assert started.kind == "run_started"
        # the parent's head as read (and verified): its last event of cycles up to n
        head = [e for e in store.events(parent.run_id) if e.cycle <= n][-1]
        link = dict(started.payload["forked_from"])
        taken = link.pop("facts")  # the frontier of the facts referred to (issue 46)
        assert link == {
            "run": parent.run_id,
            "cycle": n,
            "facts_root": _root_up_to(store, parent.run_id, n),
            "parent_head": {"seq": head.seq, "chain_hash": head.hash},
        }
        assert taken["count"] == len(
            [f for f in store.facts(parent.run_id) if f.provenance.cycle <= n]
        )
        assert MerkleFrontier.from_json(taken["frontier"]).root() == link["facts_root"]
        assert "initial_facts" not in started.payload  # referred to, not copied
        assert store.run(fork.run_id).parent_run_id == parent.run_id
        # the inherited facts keep their ids and provenance (the parent's cycles)
        inherited = [f for f in store.facts(parent.run_id) if f.provenance.cycle <= n]
        assert store.facts(fork.run_id)[: len(inherited)] == inherited
        # the first event is canonical JSON
        with store.transaction(write=False) as conn:
            text = conn.execute(
                select(audit_events.c.payload).where(
                    audit_events.c.run_id == fork.run_id, audit_events.c.seq == 1
                )
            ).scalar_one()
        assert text == canonical_json(json.loads(text))
        assert fork_link(store, fork.run_id) == ForkLink(
            fork.run_id, parent.run_id, n, _root_up_to(store, parent.run_id, n)
        )
    assert [f.fork for f in forks_of(store, parent.run_id)] == [f.run_id for f in forks]
    assert fork_link(store, parent.run_id) is None


def test_a_fork_stopped_by_its_budget_resumes_and_forks_again_to_the_uninterrupted_stop(
    store: SqlRunStore,
) -> None:
    suggestors, initial = JOBS["counter"]
    whole = _engine(store, suggestors, 20).run(initial)
    parent = _engine(store, suggestors, 3).run(initial)
    fork = _engine(store, suggestors, 4).fork(parent.run_id, 2)
    assert fork.stop_reason.kind_code() == "cycle_budget_exhausted"
    # its checkpoint refers to its fact chunks: the inherited facts, then its own
    resumed = _engine(store, suggestors, 20).resume_run(fork.run_id, Budget(max_cycles=20))
    again = _engine(store, suggestors, 20).fork(fork.run_id, 4)  # a fork of a fork
    for result in (resumed, again):
        assert result.stop_reason == whole.stop_reason
        assert store.run(result.run_id).facts_root == store.run(whole.run_id).facts_root
        assert [(f.id, f.content, f.provenance) for f in result.context] == [
            (f.id, f.content, f.provenance) for f in whole.context
        ]
        assert store.verify(result.run_id).ok
    assert fork_link(store, again.run_id) == ForkLink(
        again.run_id, fork.run_id, 4, _root_up_to(store, fork.run_id, 4)
    )


def test_a_cycle_the_store_cannot_rebuild_is_a_fork_error(store: SqlRunStore) -> None:
    parent = _engine(store, (ping, pong), 3).run({"ping": [0]})
    engine = _engine(store, (ping, pong), 8)
    with pytest.raises(ForkError, match="recorded 3 cycle"):
        engine.fork(parent.run_id, 4)
    with pytest.raises(ForkError, match="cycle -1"):
        engine.fork(parent.run_id, -1)
    with pytest.raises(RunNotFound):
        engine.fork("no-such-run", 1)
    with pytest.raises(ForkError, match="store"):
        Engine().register(ping, pong).fork(parent.run_id, 1)
    lost = next(
        e.seq for e in store.events(parent.run_id) if e.kind == "cycle_started" and e.cycle == 2
    )
    with store.transaction() as conn:  # a cycle's events lost
        conn.execute(
            delete(audit_events).where(
                audit_events.c.run_id == parent.run_id,
                audit_events.c.kind == "cycle_started",
                audit_events.c.cycle == 2,
            )
        )
    # the chain up to the fork point, and the link of the event after it, are verified
    for cycle in (3, 1):
        with pytest.raises(UnverifiedParent, match=f"seq {lost}: row missing") as refused:
            engine.fork(parent.run_id, cycle)
        assert (refused.value.run_id, refused.value.first_bad_seq) == (parent.run_id, lost)
    assert engine.fork(parent.run_id, 0).stop_reason.kind_code() == "cycle_budget_exhausted"


def test_fork_diff_and_show_from_the_command_line(tmp_path: Path) -> None:
    db = str(tmp_path / "tt.db")
    runner = CliRunner()
    first = runner.invoke(app, ["run", str(OSCILLATOR), "--db", db, "--json"])
    assert first.exit_code == 3, first.output
    parent = json.loads(first.stdout)["run_id"]
    forked = runner.invoke(
        app, ["fork", parent[:8], "--at-cycle", "4", "--max-cycles", "12", "--db", db, "--json"]
    )
    assert forked.exit_code == 3, forked.output
    child = json.loads(forked.stdout)["run_id"]
    assert child != parent
    shown = runner.invoke(app, ["show", child, "--db", db], terminal_width=200)
    assert f"forked from {parent} at cycle 4" in re.sub(r"[│\s]+", " ", shown.stdout)
    diff = runner.invoke(app, ["diff", parent, child, "--db", db, "--json"])
    assert diff.exit_code == 1, diff.output
    body = json.loads(diff.stdout)
    assert body["b"]["forked_from"]["run"] == parent
    assert body["b"]["forked_from"]["cycle"] == 4
    assert body["facts"]["only_a"] == [] and body["facts"]["changed"] == []
    assert [f["id"] for f in body["facts"]["only_b"]] == ["pong#5", "ping#6"]
    assert body["diverged_at_cycle"] == 11
    assert body["budget"]["cycles"] == {
        "a": {"used": 10, "limit": 10, "percent": 100.0},
        "b": {"used": 12, "limit": 12, "percent": 100.0},
    }
    assert "B is a fork of the other run at cycle 4" in body["why"]
    assert "same stop: cycle_budget_exhausted" in body["why"]
    same = runner.invoke(app, ["diff", parent, parent, "--db", db])
    assert same.exit_code == 0, same.output
    assert "same stop" in same.stdout
    bad = runner.invoke(app, ["fork", parent, "--at-cycle", "99", "--db", db])
    assert bad.exit_code == 2
    assert "cannot fork it at cycle 99" in bad.stderr


def test_runs_show_and_lineage_name_the_parent_of_a_fork(tmp_path: Path) -> None:
    db = str(tmp_path / "tt.db")
    runner = CliRunner()
    parent = json.loads(runner.invoke(app, ["run", str(OSCILLATOR), "--db", db, "--json"]).stdout)
    child = json.loads(
        runner.invoke(
            app, ["fork", parent["run_id"], "--at-cycle", "4", "--db", db, "--json"]
        ).stdout
    )
    p, c = parent["run_id"], child["run_id"]
    listed = runner.invoke(app, ["runs", "--db", db], terminal_width=200)
    assert listed.exit_code == 0, listed.output
    assert "forked from" in listed.stdout
    rows = {line.split()[1]: line for line in listed.stdout.splitlines() if line.count("│") > 2}
    assert f"{p[:8]}@4" in rows[c] and "@" not in rows[p]
    as_json = {
        r["run_id"]: r
        for r in json.loads(runner.invoke(app, ["runs", "--db", db, "--json"]).stdout)
    }
    assert as_json[c]["forked_from"] == {
        "run": p,
        "cycle": 4,
        "facts_root": as_json[c]["forked_from"]["facts_root"],
    }
    assert as_json[p]["forked_from"] is None
    shown = runner.invoke(app, ["show", p, "--db", db], terminal_width=200)
    assert f"forks {c} at cycle 4" in re.sub(r"[│\s]+", " ", shown.stdout)
    # the lineage of a fact the fork promoted reaches facts it took from its parent
    tree = runner.invoke(app, ["lineage", c, "pong#4", "--db", db], terminal_width=200)
    assert tree.exit_code == 0, tree.output
    lines = tree.stdout.splitlines()
    assert f"forked from {p} at cycle 4" in lines[0]
    own = next(line for line in lines if "pong#4 " in line)
    taken = next(line for line in lines if "ping#2 " in line)
    assert "from run" not in own and f"cycle 4, from run {p}" in taken
    nodes = json.loads(runner.invoke(app, ["lineage", c, "pong#4", "--db", db, "--json"]).stdout)
    runs_of = {n["id"]: n.get("run") for n in nodes["nodes"]}
    assert runs_of["pong#4"] is None and runs_of["ping#2"] == p and runs_of["ping#0"] == p
