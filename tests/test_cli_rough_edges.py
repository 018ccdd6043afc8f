"""The rough edges a new user met in the command line, each a behaviour they rely on:
help that shows flags as flags and summaries as sentences, report tables whose
titles stay whole and that say when a run has no facts for them, and the
dependency-audit example naming its extra when a library of it is missing."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from converge.cli import app
from converge.cli.commands import summary
from converge.cli.render import failing_on
from engine import ConvergeError, RunNotFound
from tests.freshpython import python_c

runner = CliRunner()
ROOT = Path(__file__).resolve().parent.parent


def _all_commands() -> list[tuple[list[str], Any]]:
    """Every command and group of ``converge`` with the arguments that reach it."""
    root: Any = typer.main.get_command(app)
    found: list[tuple[list[str], Any]] = [([], root)]
    for name, command in sorted(root.commands.items()):
        found.append(([name], command))
        for sub, subcommand in sorted(getattr(command, "commands", {}).items()):
            found.append(([name, sub], subcommand))
    return found


def test_no_help_page_shows_a_value_placeholder_beside_a_flag() -> None:
    pages = {" ".join(args) or "converge": _help(args) for args, _ in _all_commands()}
    with_placeholder = {name: page for name, page in pages.items() if "<bool>" in page}
    assert with_placeholder == {}
    # the flags are still listed, and options that take a value keep their placeholder
    assert re.search(r"--version\s+Print the version", pages["converge"])
    assert re.search(r"--json\s+Print JSON", pages["verify"])
    assert re.search(r"--db\s+<str>", pages["verify"])


def test_each_command_summary_is_one_sentence_not_broken_at_its_source_lines() -> None:
    # at 300 columns every summary fits on one row of the command list: a summary
    # broken at its docstring's line ends ("...the ledger against" / "them; ...") does not
    page = _help([], width=300)
    root: Any = typer.main.get_command(app)
    for name, command in root.commands.items():
        expected = summary(command.help)
        assert expected, f"{name} has no summary"
        row = next(line for line in page.splitlines() if re.match(rf"│ {name}\s", line))
        assert expected in row, f"{name}: {row!r}"


def test_summary_joins_the_lines_of_the_first_paragraph_only() -> None:
    assert summary("Recompute the chains and the ledger against\n    them.\n\nMore.") == (
        "Recompute the chains and the ledger against them."
    )
    assert summary(None) is None and summary("") is None


def _help(args: list[str], width: int = 80) -> str:
    # rich reads the width of a console that is no terminal from COLUMNS
    res = runner.invoke(app, [*args, "--help"], env={"COLUMNS": str(width)})
    assert res.exit_code == 0, res.output
    return res.stdout


COUNTS = """\
name: counts
suggestors: [tests.jobfixtures:catalogue]
report:
  - {key: item, title: Items counted by their license identifier, count_by: spdx}
  - {key: finding, title: Findings}
"""


def test_a_report_title_is_printed_whole_above_a_narrow_table(tmp_path: Path) -> None:
    job = tmp_path / "counts.yaml"
    job.write_text(COUNTS)
    res = runner.invoke(app, ["run", str(job), "--no-audit"], terminal_width=80)
    assert res.exit_code == 0, res.output
    # the count table is two narrow columns; its title is longer and stays on one line
    assert "Items counted by their license identifier (2)" in res.stdout
    assert re.search(r"│ MIT\s+│\s+2 │", res.stdout)


def test_a_report_without_facts_says_so_instead_of_an_empty_table(tmp_path: Path) -> None:
    job = tmp_path / "counts.yaml"
    job.write_text(COUNTS)
    res = runner.invoke(app, ["run", str(job), "--no-audit"], terminal_width=80)
    assert res.exit_code == 0, res.output
    after = res.stdout.split("Findings (0)", 1)[1]
    assert after.strip() == "no finding facts in this run"


def test_a_run_stopped_before_any_fact_prints_no_empty_report_tables(tmp_path: Path) -> None:
    job = tmp_path / "boom.yaml"
    job.write_text(
        "name: boom\nsuggestors: [tests.jobfixtures:boom]\n"
        "report:\n  - {key: item, title: Items, columns: [name, spdx]}\n"
    )
    res = runner.invoke(app, ["run", str(job), "--no-audit"], terminal_width=80)
    assert res.exit_code == 5, res.output
    reports = res.stdout.split("Items (0)", 1)[1]
    assert reports.strip() == "no item facts in this run"
    assert "┏" not in reports  # no table header of an empty table


def test_the_readme_example_without_its_extra_is_a_one_line_hint_naming_the_extra() -> None:
    # as if `pip install converge-engine` without the examples extra: license_expression absent
    script = (
        "import sys\n"
        "sys.modules['license_expression'] = None\n"
        "from converge.cli import app\n"
        "app(['run', 'examples/dependency_audit/job.yaml', '--no-audit'])\n"
    )
    res = python_c(script)
    assert res.returncode == 2, res.stderr
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, res.stderr
    assert "'examples' extra" in lines[0] and "pip install" in lines[0]
    assert "license_expression is missing" in lines[0]
    assert "Traceback" not in res.stderr and "ModuleNotFoundError" not in res.stderr


def test_failing_on_ends_the_command_with_the_errors_text_and_exit_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(typer.Exit) as ended, failing_on(ConvergeError):
        raise RunNotFound("no run 'r-1' in audit store runs.db")
    assert ended.value.exit_code == 2
    assert capsys.readouterr().err.strip() == "error: no run 'r-1' in audit store runs.db"


def test_failing_on_lets_other_errors_and_a_quiet_block_through() -> None:
    with pytest.raises(ValueError, match="not ours"), failing_on(ConvergeError):
        raise ValueError("not ours")
    with failing_on(ConvergeError):
        done = True
    assert done
