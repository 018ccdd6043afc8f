"""What a new user meets on the first day at the command line (issue 32): tables
that fit the terminal, ``converge events``, run ids by a unique prefix, the next
command of a paused run with its ``--by``, budgets on ``converge run`` and
``resume --add-cycles``, advice for a job that oscillates, the exit code kept on a
closed pipe, and reading commands that refuse a store that does not exist."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from audit import SqlRunStore, open_store
from converge.cli import app
from engine import Budget, CycleBudgetExhausted, Engine, RunNotFound
from engine.errors import AmbiguousRunId
from tests.hitlfixtures import INITIAL, make_engine
from tests.jobfixtures import tick
from tests.realserve import converge_piped_to_nobody
from tests.webfixtures import VENDORED

runner = CliRunner()
ROOT = Path(__file__).resolve().parent.parent
OSCILLATOR = ROOT / "examples" / "oscillator" / "job.yaml"
LONG_JOB = "dependency-audit-vendored"


def cli(*args: str, width: int | None = None) -> Result:
    env = None if width is None else {"COLUMNS": str(width)}
    return runner.invoke(app, list(args), env=env)


def lines_of(res: Result) -> list[str]:
    return res.stdout.splitlines()


def ticked(store: SqlRunStore, run_id: str, cycles: int = 3, job: str = LONG_JOB) -> str:
    """A run of ``tick`` stopped by its cycle budget, recorded under ``run_id``."""
    engine = Engine(budget=Budget(max_cycles=cycles), store=store, job_name=job)
    result = engine.register(tick).run(run_id=run_id)
    assert isinstance(result.stop_reason, CycleBudgetExhausted)
    return result.run_id


def write_job(tmp_path: Path, text: str, name: str = "job.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# -- 3. tables that fit the terminal -----------------------------------------------------


@pytest.mark.parametrize("width", [80, 200])
def test_runs_fits_the_terminal_with_run_status_stop_cycles_and_start_whole(
    tmp_path: Path, width: int
) -> None:
    db = str(tmp_path / "t.db")
    store = open_store(db)
    run_id = ticked(store, uuid.uuid4().hex[:16])
    paused = make_engine(store).run(INITIAL).run_id
    store.close()

    res = cli("runs", "--db", db, width=width)

    assert res.exit_code == 0, res.output
    assert all(len(line) <= width for line in lines_of(res)), res.stdout
    row = next(line for line in lines_of(res) if run_id in line)
    assert "cycle_budget_exhausted" in row and "stopped" in row
    assert (LONG_JOB in row) == (width == 200)
    assert "hitl_gate_pending" in next(line for line in lines_of(res) if paused in line)
    assert "…" not in res.stdout  # no header or value cut to "depe…"
    header = next(line for line in lines_of(res) if "┃ run" in line)
    if width == 200:
        for column in ("status", "category", "cycles", "facts", "started", "ms"):
            assert f" {column} " in header
        assert "not shown" not in res.stdout
    else:
        for column in ("status", "kind", "cycles", "started"):  # kind: the stop's
            assert f" {column} " in header
        assert "not shown at 80 columns:" in res.stdout and "job" in res.stdout


@pytest.mark.parametrize("width", [80, 200])
def test_pending_gates_fit_the_terminal_with_the_gate_id_whole(tmp_path: Path, width: int) -> None:
    db = str(tmp_path / "v.db")
    assert cli("run", str(VENDORED), "--db", db, "--json").exit_code == 10
    [gate] = json.loads(cli("gates", "--pending", "--json", "--db", db).stdout)

    res = cli("gates", "--pending", "--db", db, width=width)

    assert res.exit_code == 0, res.output
    assert all(len(line) <= width for line in lines_of(res)), res.stdout
    body = [line for line in lines_of(res) if line.startswith("│")]
    assert gate["gate_id"] in body[0]
    # one gate, not spread over 13 lines; nothing cut, the proposal folds whole
    assert len(body) <= (2 if width == 200 else 7), res.stdout
    assert "…" not in res.stdout
    header = next(line for line in lines_of(res) if "┃ gate" in line)
    at = [c.strip() for c in header.split("┃")].index("proposal")
    folded = "".join(line.split("│")[at].strip() for line in body)
    assert "legacy-left-pad" in folded and "metadata" in folded
    # the decided and reason columns of pending gates are always empty: not shown
    assert "decided" not in res.stdout and "reason" not in res.stdout


@pytest.mark.parametrize("width", [80, 200])
def test_facts_fit_the_terminal_and_keep_every_id_whole(tmp_path: Path, width: int) -> None:
    db = str(tmp_path / "v.db")
    run_id = json.loads(cli("run", str(VENDORED), "--db", db, "--json").stdout)["run_id"]
    facts = json.loads(cli("facts", run_id, "--json", "--db", db).stdout)

    res = cli("facts", run_id, "--db", db, width=width)

    assert res.exit_code == 0, res.output
    longest = max(len(line) for line in lines_of(res))
    assert longest <= width, res.stdout
    assert all(any(f"│ {f['id']} " in line for line in lines_of(res)) for f in facts)
    if width == 80:
        assert "not shown at 80 columns:" in res.stdout


def test_the_show_timeline_fits_80_columns(tmp_path: Path) -> None:
    db = str(tmp_path / "v.db")
    run_id = json.loads(cli("run", str(VENDORED), "--db", db, "--json").stdout)["run_id"]
    res = cli("show", run_id, "--db", db, width=80)
    assert res.exit_code == 0, res.output
    # but the next commands, pasted whole (with this test's long --db path)
    shown = [line for line in lines_of(res) if not line.startswith(("next:", "  or:"))]
    assert all(len(line) <= 80 for line in shown), res.stdout


# -- 4. converge events ----------------------------------------------------------------


def test_events_lists_a_runs_audit_events(store_url: str, store: SqlRunStore) -> None:
    run_id = ticked(store, uuid.uuid4().hex[:16], cycles=2)
    stored = store.events(run_id)

    res = cli("events", run_id, "--db", store_url, width=120)

    assert res.exit_code == 0, res.output
    assert f"events of {run_id} ({len(stored)})" in res.stdout
    rows = [line for line in lines_of(res) if line.startswith("│")]
    assert len(rows) >= len(stored)
    first = rows[0].split("│")
    assert [c.strip() for c in first[1:4]] == ["1", "0", "run_started"]
    assert any("fact_promoted" in r and "key=n" in r for r in rows)

    only = cli("events", run_id, "--kind", "fact_promoted", "--json", "--db", store_url)
    assert only.exit_code == 0, only.output
    data = json.loads(only.stdout)
    promoted = store.events(run_id, kinds=["fact_promoted"])
    assert [e["seq"] for e in data] == [e.seq for e in promoted]
    assert data[0]["payload"] == promoted[0].payload  # whole, not a summary
    assert data[0]["hash"] == promoted[0].hash and data[0]["kind"] == "fact_promoted"

    kinds = ["--kind", "run_started", "--kind", "run_stopped"]
    two = json.loads(cli("events", run_id[:8], *kinds, "--json", "--db", store_url).stdout)
    assert [e["kind"] for e in two] == ["run_started", "run_stopped"]


def test_events_refuses_an_unknown_kind_naming_the_known_ones(tmp_path: Path) -> None:
    db = str(tmp_path / "e.db")
    store = open_store(db)
    run_id = ticked(store, "r1")
    store.close()
    res = cli("events", run_id, "--kind", "fact_promotd", "--db", db)
    assert res.exit_code == 2
    assert "--kind 'fact_promotd' is not one of:" in res.stderr and "fact_promoted" in res.stderr


# -- 6. run ids by a unique prefix; the next command with its --by -----------------------


def test_the_store_resolves_a_unique_prefix_and_lists_an_ambiguous_one(
    store: SqlRunStore,
) -> None:
    base = uuid.uuid4().hex[:8]
    one = ticked(store, f"{base}aa11", cycles=1)
    two = ticked(store, f"{base}aa22", cycles=1)
    other = ticked(store, f"{base}bb33", cycles=1)

    assert store.resolve_run_id(f"{base}b") == other
    assert store.resolve_run_id(one) == one
    assert store.resolve_run_id(f"{base}aa2") == two
    with pytest.raises(AmbiguousRunId) as ambiguous:
        store.resolve_run_id(f"{base}aa")
    assert ambiguous.value.candidates == (one, two)
    assert one in str(ambiguous.value) and two in str(ambiguous.value)
    for missing in ("zz", f"{base}AA", f"{base}_a", f"{base}%", ""):
        with pytest.raises(RunNotFound, match="no run"):
            store.resolve_run_id(missing)


def test_report_show_facts_events_and_verify_take_a_prefix(tmp_path: Path) -> None:
    db = str(tmp_path / "p.db")
    store = open_store(db)
    run_id = ticked(store, "a5cf8d95e1b2c3d4")
    ticked(store, "a5cf0000e1b2c3d4")
    store.close()

    for command in ("show", "facts", "events", "verify"):
        res = cli(command, "a5cf8d95", "--db", db)
        assert res.exit_code == 0, (command, res.output)
        assert run_id in res.stdout, command
    report = cli("report", "a5cf8d95", "--db", db, "--format", "json")
    assert report.exit_code == 0 and json.loads(report.stdout)["run_id"] == run_id
    lineage = cli("lineage", "a5cf8d95", "n#1", "--db", db, "--json")
    assert lineage.exit_code == 0 and json.loads(lineage.stdout)["fact"] == "n#1"

    ambiguous = cli("report", "a5cf", "--db", db)
    assert ambiguous.exit_code == 2
    assert "ambiguous" in ambiguous.stderr
    assert "a5cf8d95e1b2c3d4" in ambiguous.stderr and "a5cf0000e1b2c3d4" in ambiguous.stderr
    missing = cli("show", "x", "--db", db)
    assert missing.exit_code == 2 and "no run 'x'" in missing.stderr


def test_a_paused_run_prints_the_commands_that_decide_it_with_by(tmp_path: Path) -> None:
    db = str(tmp_path / "v.db")
    res = cli("run", str(VENDORED), "--db", db, width=80)
    assert res.exit_code == 10, res.output
    [gate] = json.loads(cli("gates", "--json", "--db", db).stdout)
    gate_id = gate["gate_id"]
    expected = [
        f"next: converge approve {gate_id} --by NAME --db {db}",
        f"  or: converge reject {gate_id} --by NAME --reason WHY --db {db}",
    ]
    assert all(line in lines_of(res) for line in expected), res.stdout
    shown = cli("show", gate["run_id"][:8], "--db", db, width=80)
    assert all(line in lines_of(shown) for line in expected), shown.stdout

    # resume of the paused run (by a prefix) names the approve command with its --by
    resumed = cli("resume", gate["run_id"][:8], "--db", db)
    assert resumed.exit_code == 2
    assert f"`converge approve {gate_id} --by NAME`" in resumed.stderr


def test_resume_of_a_finished_run_says_it_already_finished(tmp_path: Path) -> None:
    job = write_job(
        tmp_path,
        "name: met\nsuggestors: [tests.jobfixtures:tick]\ncriteria: [tests.jobfixtures:three_n]\n",
    )
    db = str(tmp_path / "m.db")
    first = cli("run", job, "--db", db, "--json")
    assert first.exit_code == 0, first.output
    run_id = json.loads(first.stdout)["run_id"]

    res = cli("resume", run_id[:6], "--db", db)

    assert res.exit_code == 2
    assert f"run {run_id} already finished (criteria_met)" in res.stderr
    assert "no checkpoint" not in res.stderr


# -- 8. budgets on run, resume --add-cycles, the advice for an oscillation ----------------


def test_run_takes_budget_options_over_the_job_files_budget(tmp_path: Path) -> None:
    db = str(tmp_path / "b.db")
    budget = ["--max-cycles", "4", "--max-seconds", "60", "--max-tokens", "1000"]
    res = cli("run", str(OSCILLATOR), "--db", db, "--json", *budget, "--max-cost", "0.5")
    assert res.exit_code == 3, res.output
    data = json.loads(res.stdout)
    assert data["stop_reason"] == {
        "kind": "cycle_budget_exhausted",
        "cycles_executed": 4,
        "limit": 4,
    }
    dims = data["budget_status"]["dimensions"]
    assert dims["cycles"]["limit"] == 4 and dims["seconds"]["limit"] == 60
    assert dims["tokens"]["limit"] == 1000 and dims["cost_usd"]["limit"] == 0.5

    bad = cli("run", str(OSCILLATOR), "--no-audit", "--max-seconds", "-1")
    assert bad.exit_code == 2
    assert "bad budget: --max-seconds:" in bad.stderr and "Traceback" not in bad.output


def test_resume_add_cycles_gives_that_many_cycles_more(tmp_path: Path) -> None:
    db = str(tmp_path / "a.db")
    first = json.loads(cli("run", str(OSCILLATOR), "--db", db, "--json").stdout)
    assert first["cycles"] == 10

    res = cli("resume", first["run_id"], "--add-cycles", "3", "--db", db, "--json")

    assert res.exit_code == 3, res.output
    data = json.loads(res.stdout)
    assert data["cycles"] == 13
    assert data["stop_reason"]["limit"] == 13

    both = cli("resume", first["run_id"], "--add-cycles", "3", "--max-cycles", "40", "--db", db)
    assert both.exit_code == 2 and "not both" in both.stderr
    zero = cli("resume", first["run_id"], "--add-cycles", "0", "--db", db)
    assert zero.exit_code == 2 and "at least 1" in zero.stderr
    # a total below what was done names --add-cycles
    low = cli("resume", first["run_id"], "--max-cycles", "5", "--db", db)
    assert low.exit_code == 2
    assert "budgets are totals" in low.stderr and "--add-cycles 5 for 5 more" in low.stderr


def test_a_spent_cycle_budget_is_not_advised_a_larger_budget_blindly() -> None:
    # issue 59 item 5: "oscillating" only when facts repeat (tests/test_third_day_cli.py);
    # the stop's own advice, which cannot tell, names both ways out
    res = cli("run", str(OSCILLATOR), "--no-audit", "--json")
    assert res.exit_code == 3
    explain = CycleBudgetExhausted(cycles_executed=10, limit=10).explain()
    assert "larger budget" not in explain
    assert "still adding facts" in explain and "loop_detection" in explain
    text = cli("run", str(OSCILLATOR), "--no-audit", width=200).stdout
    # the oscillator's numbers are new in every cycle: progress, not repeats
    assert "larger budget" not in text and "progress in each of the last 5 cycles" in text


# -- 11. the exit code on a closed pipe; no store created by reading commands -----------


@pytest.mark.parametrize("as_json", [False, True])
def test_a_closed_pipe_keeps_the_stops_exit_code(tmp_path: Path, as_json: bool) -> None:
    # the reader is gone before anything is written: every write fails (EPIPE),
    # as with `converge run job.yaml | head -1` once head has exited
    command = ["run", str(OSCILLATOR), "--no-audit"]
    done = converge_piped_to_nobody(*command, *(["--json"] if as_json else []), cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr


@pytest.mark.parametrize(
    "command",
    [
        ["runs"],
        ["show", "r1"],
        ["report", "r1"],
        ["facts", "r1"],
        ["events", "r1"],
        ["lineage", "r1", "n#0"],
        ["verify", "--all"],
        ["anchor"],
        ["gates"],
        ["resume", "r1"],
    ],
)
def test_a_reading_command_refuses_a_store_that_does_not_exist(
    tmp_path: Path, command: list[str]
) -> None:
    for db in (tmp_path / "typo" / "path.db", tmp_path / "typo.db"):
        res = cli(*command, "--db", str(db))
        assert res.exit_code == 2, res.output
        assert res.stderr.strip() == (
            f"error: no audit store at {db} (use --db to point at an existing store)"
        )
        assert not db.exists()
    assert list(tmp_path.iterdir()) == []


def test_a_reading_command_without_db_refuses_a_missing_default_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CONVERGE_DB", raising=False)
    res = runner.invoke(app, ["runs"])
    assert res.exit_code == 2
    assert f"no audit store at {tmp_path / 'converge.db'}" in res.stderr
    assert list(tmp_path.iterdir()) == []
