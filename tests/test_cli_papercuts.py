"""The command line's papercuts: each a behaviour a user relies on."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

import converge
from audit import open_store
from converge.cli import app
from engine.stop_categories import EXIT_CODES

runner = CliRunner()
ROOT = Path(__file__).resolve().parent.parent


def write(tmp_path: Path, text: str, name: str = "job.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def stderr_lines(res: object) -> list[str]:
    return [line for line in res.stderr.splitlines() if line.strip()]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("field", "line", "what"),
    [("criteria", 3, "not a criterion"), ("invariants", 4, "not an invariant")],
)
def test_a_non_criterion_or_non_invariant_is_a_one_line_error_and_nothing_is_recorded(
    tmp_path: Path, field: str, line: int, what: str
) -> None:
    text = "name: x\nsuggestors: [tests.jobfixtures:tick]\n"
    text += "criteria: [tests.jobfixtures:never]\n" if field == "invariants" else ""
    text += f"{field}: [tests.jobfixtures:small, tests.jobfixtures:NOT_A_CRITERION]\n"
    if field == "criteria":
        text = text.replace("tests.jobfixtures:small, ", "")
    db = tmp_path / "c.db"
    res = runner.invoke(app, ["run", write(tmp_path, text), "--db", str(db)])
    assert res.exit_code == 2
    lines = stderr_lines(res)
    assert len(lines) == 1, res.stderr
    index = 0 if field == "criteria" else 1
    assert (
        f"job.yaml:{line}: {field}.{index}: tests.jobfixtures:NOT_A_CRITERION is int, {what}"
        in (lines[0])
    )
    assert open_store(str(db)).runs() == []


def test_the_summary_criteria_are_those_at_the_stop(tmp_path: Path) -> None:
    # cycle 1 evaluates three_n on one n; cycle 2's invariant stop comes with two
    text = (
        "name: x\nsuggestors: [tests.jobfixtures:tick]\n"
        "criteria: [tests.jobfixtures:three_n]\ninvariants: [tests.jobfixtures:at_most_one_n]\n"
    )
    res = runner.invoke(app, ["run", write(tmp_path, text), "--no-audit", "--json"])
    assert res.exit_code == 4
    data = json.loads(res.stdout)
    assert data["stop_reason"]["kind"] == "invariant_violated"
    assert data["criteria"] == [
        {"id": "three_n", "required": True, "outcome": "unmet", "reason": "2 of 3 n facts"}
    ]


def _module_once(jobdir: Path, module: str, name: str, key: str, content: str) -> Path:
    """``jobdir`` made, holding ``MODULE.py`` whose suggestor ``name`` proposes ``key``
    (``content``: a Python literal) once; ``jobdir``."""
    jobdir.mkdir()
    (jobdir / f"{module}.py").write_text(
        "from engine import Proposal, suggestor\n"
        f"@suggestor(name={name!r})\n"
        f"def {name}(ctx):\n"
        f"    return [] if ctx.has({key!r}) else [Proposal({key!r}, {content})]\n"
    )
    return jobdir


def test_modules_resolve_next_to_the_job_file_from_any_directory(tmp_path: Path) -> None:
    jobdir = _module_once(tmp_path / "myjob", "papercut_neighbour", "hello", "greeting", "'hi'")
    job = write(jobdir, "name: n\nsuggestors: [papercut_neighbour:hello]\n")
    try:
        assert str(jobdir) not in sys.path and os.getcwd() != str(jobdir)
        res = runner.invoke(app, ["run", job, "--no-audit", "--json"])
        assert res.exit_code == 0, res.output
        assert json.loads(res.stdout)["stop_reason"]["kind"] == "converged"
    finally:
        sys.modules.pop("papercut_neighbour", None)
        if str(jobdir) in sys.path:
            sys.path.remove(str(jobdir))


def test_approve_finds_the_job_modules_of_a_run_started_elsewhere(tmp_path: Path) -> None:
    jobdir = _module_once(tmp_path / "gated", "papercut_gated", "ask", "answer", "42")
    job = write(
        jobdir,
        "name: g\nsuggestors: [papercut_gated:ask]\ngates: [{hitl: {keys: [answer]}}]\n",
    )
    db = str(tmp_path / "c.db")
    try:
        res = runner.invoke(app, ["run", job, "--db", db, "--json"])
        assert res.exit_code == 10, res.output
        gate = json.loads(res.stdout)["stop_reason"]["gate_id"]
        # another process: nothing of the first run's imports is left
        sys.modules.pop("papercut_gated", None)
        sys.path.remove(str(jobdir))
        res = runner.invoke(app, ["approve", gate, "--by", "alice", "--db", db, "--json"])
        assert res.exit_code == 0, res.output
    finally:
        sys.modules.pop("papercut_gated", None)
        if str(jobdir) in sys.path:
            sys.path.remove(str(jobdir))


def test_reading_commands_work_on_a_read_only_database_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    live = tmp_path / "live.db"
    job = write(
        tmp_path, "name: t\nsuggestors: [tests.jobfixtures:tick]\nbudget: {max_cycles: 2}\n"
    )
    assert runner.invoke(app, ["run", job, "--db", str(live)]).exit_code == 3
    run_id = json.loads(runner.invoke(app, ["runs", "--db", str(live), "--json"]).stdout)[0][
        "run_id"
    ]
    # the auditor's copy: the database file alone, write-protected, in a protected directory
    archive = tmp_path / "archive"
    archive.mkdir()
    db = archive / "c.db"
    with sqlite3.connect(live) as src, sqlite3.connect(db) as dst:
        src.backup(dst)
    db.chmod(0o444)
    archive.chmod(0o555)
    real_access = os.access

    def access(path: object, mode: int, **kw: object) -> bool:
        # root may write anything: answer as the auditor, whose copy is write-protected
        if mode & os.W_OK and str(path).startswith(str(archive)):
            return stat.S_IMODE(os.stat(str(path)).st_mode) & 0o222 != 0
        return real_access(path, mode, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "access", access)
    try:
        for args in (
            ["runs"],
            ["show", run_id],
            ["facts", run_id],
            ["lineage", run_id, "n#1"],
            ["verify", run_id],
            ["report", run_id],
        ):
            res = runner.invoke(app, [*args, "--db", str(db)])
            assert res.exit_code == 0, (args, res.output)
        assert sorted(p.name for p in archive.iterdir()) == ["c.db"]
    finally:
        archive.chmod(0o755)
        db.chmod(0o644)


def test_version_prints_the_package_version() -> None:
    res = runner.invoke(app, ["--version"])
    assert res.exit_code == 0 and res.stdout.strip() == f"converge {converge.__version__}"


def _commands() -> list[tuple[str, Any]]:
    group: Any = typer.main.get_command(app)
    return sorted(group.commands.items())


def _options(command: Any) -> list[Any]:
    return [p for p in command.params if p.param_type_name == "option"]


# converge/cli/gates.py (gates, approve, reject, resume) is another developer's work


def test_every_option_of_every_command_has_help_text() -> None:
    missing = [
        f"{name} {param.opts[0]}"
        for name, command in _commands()
        for param in _options(command)
        if not (param.help or "").strip()
    ]
    assert missing == []
    assert all((p.help or "").strip() for p in _options(typer.main.get_command(app)))


def test_run_help_lists_every_exit_code() -> None:
    res = runner.invoke(app, ["run", "--help"], terminal_width=200)
    text = " ".join(res.stdout.split())
    for category, code in EXIT_CODES.items():
        assert f"{code} {category.value}" in text
    assert "2 bad input" in text


def test_every_command_the_readme_names_exists_and_it_says_how_to_put_converge_on_path() -> None:
    readme = (ROOT / "README.md").read_text()
    named = set(re.findall(r"^converge (\w+)", readme, re.M))
    named |= set(re.findall(r"; converge (\w+)", readme))
    assert named >= {"run", "gates", "approve", "reject", "resume", "runs", "show", "report"}
    assert named <= {name for name, _ in _commands()}
    assert "source .venv/bin/activate" in readme


@pytest.mark.parametrize(
    ("option", "value", "valid"),
    [
        ("--category", "budgets", "budget, validation"),
        ("--kind", "cycle_budget", "cycle_budget_exhausted"),
        ("--status", "done", "running, paused, stopped, crashed"),
    ],
)
def test_runs_rejects_an_unknown_filter_value_with_the_valid_ones(
    tmp_path: Path, option: str, value: str, valid: str
) -> None:
    res = runner.invoke(app, ["runs", option, value, "--db", str(tmp_path / "c.db")])
    assert res.exit_code == 2
    lines = stderr_lines(res)
    assert len(lines) == 1 and f"{option} {value!r} is not one of:" in lines[0]
    assert valid in lines[0]


def test_run_no_audit_warns_when_a_gate_could_never_be_decided(tmp_path: Path) -> None:
    gated = "name: g\nsuggestors: [tests.jobfixtures:tick]\nbudget: {max_cycles: 1}\n"
    gated += "gates: [{hitl: {keys: [nothing]}}]\n"
    res = runner.invoke(app, ["run", write(tmp_path, gated), "--no-audit"])
    assert "a pause at a gate could never be approved or rejected" in res.stderr
    plain = "name: p\nsuggestors: [tests.jobfixtures:tick]\nbudget: {max_cycles: 1}\n"
    res = runner.invoke(app, ["run", write(tmp_path, plain, "p.yaml"), "--no-audit"])
    assert "warning" not in res.stderr


def test_resume_of_a_run_waiting_on_a_gate_names_the_commands_to_decide_it(
    tmp_path: Path,
) -> None:
    job = write(
        tmp_path, "name: g\nsuggestors: [tests.jobfixtures:tick]\ngates: [{hitl: {keys: [n]}}]\n"
    )
    db = str(tmp_path / "c.db")
    res = runner.invoke(app, ["run", job, "--db", db, "--json"])
    assert res.exit_code == 10
    data = json.loads(res.stdout)
    gate = data["stop_reason"]["gate_id"]
    res = runner.invoke(app, ["resume", data["run_id"], "--db", db])
    assert res.exit_code == 2
    assert f"`converge approve {gate} --by NAME`" in res.stderr and "resume(" not in res.stderr


def test_a_rejected_fact_keeps_the_parents_of_the_rejected_proposal(tmp_path: Path) -> None:
    job = ROOT / "examples" / "dependency_audit" / "vendored.yaml"
    db = str(tmp_path / "c.db")
    res = runner.invoke(app, ["run", str(job), "--db", db, "--json"])
    assert res.exit_code == 10, res.output
    data = json.loads(res.stdout)
    gate = data["stop_reason"]["gate_id"]
    res = runner.invoke(app, ["reject", gate, "--by", "bob", "--reason", "MIT", "--db", db])
    assert res.exit_code == 0, res.output
    store = open_store(db)
    rejected = store.facts(data["run_id"], "hitl.rejected")[0]
    lineage = store.lineage(data["run_id"], rejected.id)
    reached = {lineage.nodes[n]["fact"].key for n in lineage.nodes if "fact" in lineage.nodes[n]}
    assert "package" in reached  # the vendored component's package fact
    license_fact = next(
        f for f in store.facts(data["run_id"], "license") if f.content["source"] == "human"
    )
    assert rejected.id in store.lineage(data["run_id"], license_fact.id).nodes


def test_a_failing_suggestors_traceback_is_in_its_event_and_show_v(tmp_path: Path) -> None:
    job = write(tmp_path, "name: b\nsuggestors: [tests.jobfixtures:boom]\n")
    db = str(tmp_path / "c.db")
    res = runner.invoke(app, ["run", job, "--db", db, "--json"])
    assert res.exit_code == 5
    run_id = json.loads(res.stdout)["run_id"]
    event = open_store(db).events(run_id, kinds=["suggestor_failed"])[0]
    assert "Traceback" in event.payload["traceback"]
    assert 'raise ValueError("boom' in event.payload["traceback"]
    res = runner.invoke(app, ["show", run_id, "-v", "--db", db], terminal_width=200)
    assert res.exit_code == 0
    assert "boom failed in cycle 1" in res.stdout and "jobfixtures.py" in res.stdout
    plain = runner.invoke(app, ["show", run_id, "--db", db], terminal_width=200)
    assert "Traceback" not in plain.stdout
