"""``converge run``: exit codes, --json, and one-line errors for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from converge.cli import app
from engine import CycleBudgetExhausted, parse_stop_reason

runner = CliRunner()


def write(tmp_path: Path, text: str, name: str = "job.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


TICKER = "name: ticker\nsuggestors: [tests.jobfixtures:tick]\nbudget: {max_cycles: 3}\n"


def test_run_exits_with_the_code_of_the_stop_and_prints_a_summary(tmp_path: Path) -> None:
    res = runner.invoke(app, ["run", write(tmp_path, TICKER), "--no-audit"])
    assert res.exit_code == 3, res.output
    assert "cycle budget exhausted: 3/3 cycles" in res.output
    assert "facts per key" in res.output


def test_run_json_output_parses_to_a_stop_reason(tmp_path: Path) -> None:
    res = runner.invoke(app, ["run", write(tmp_path, TICKER), "--no-audit", "--json"])
    assert res.exit_code == 3
    data = json.loads(res.stdout)
    reason = parse_stop_reason(data["stop_reason"])
    assert reason == CycleBudgetExhausted(cycles_executed=3, limit=3)
    assert data["exit_code"] == 3 and data["facts_count"] == 3


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("name: x\nsuggestors: [tests.jobfixtures:nope]\n", "job.yaml:2: suggestors.0: module"),
        ("name: x\nsuggestors: [tests.jobfixtures:tick\n", "job.yaml:2: invalid YAML"),
        (
            "name: x\nsuggestors: [tests.jobfixtures:tick]\nbudget: {max_cycles: many}\n",
            "job.yaml:3: budget.max_cycles",
        ),
    ],
)
def test_bad_job_files_give_a_one_line_error_and_exit_2(
    tmp_path: Path, text: str, expected: str
) -> None:
    res = runner.invoke(app, ["run", write(tmp_path, text), "--no-audit"])
    assert res.exit_code == 2
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, res.stderr
    assert expected in lines[0]
    assert "Traceback" not in res.output


def test_a_missing_job_file_is_a_one_line_error(tmp_path: Path) -> None:
    res = runner.invoke(app, ["run", str(tmp_path / "absent.yaml"), "--no-audit"])
    assert res.exit_code == 2
    assert "cannot read job file" in res.stderr
