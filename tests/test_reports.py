"""Reports: the facts a user came for, shown whole (DESIGN.md §11).

The demo job's report names every package with its SPDX id and every copyleft
finding with its dependency path; ``converge report`` renders the same from the
store as a table, Markdown, CSV or JSON; ``run --json`` carries the report facts.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

from typer.testing import CliRunner

from audit import open_store
from converge.cli import app
from converge.reports import ReportSpec, build_report, cell, render_markdown
from engine import Fact
from tests.jobfixtures import LONG_NAME

runner = CliRunner()
ROOT = Path(__file__).resolve().parent.parent

CATALOGUE = """\
name: catalogue
suggestors: [tests.jobfixtures:catalogue]
report:
  - {key: item, title: Items, columns: [name, spdx, path], join: {path: " -> "}}
  - {key: item, title: Items per license, count_by: spdx}
"""


def run_catalogue(tmp_path: Path, *extra: str) -> tuple[int, str, str]:
    job = tmp_path / "catalogue.yaml"
    job.write_text(CATALOGUE)
    res = runner.invoke(app, ["run", str(job), "--db", str(tmp_path / "c.db"), *extra])
    return res.exit_code, res.stdout, res.stderr


def only_run(db: Path) -> str:
    res = runner.invoke(app, ["runs", "--db", str(db), "--json"])
    runs = json.loads(res.stdout)
    assert len(runs) == 1
    return str(runs[0]["run_id"])


def test_the_demo_job_names_each_package_with_its_spdx_id_and_each_copyleft_path(
    tmp_path: Path,
) -> None:
    db = tmp_path / "demo.db"
    job = ROOT / "examples" / "dependency_audit" / "job.yaml"
    res = runner.invoke(app, ["run", str(job), "--db", str(db)])
    assert res.exit_code == 0, res.output
    store = open_store(str(db))
    run_id = only_run(db)
    licenses = [f.content for f in store.facts(run_id, "license")]
    risks = [f.content for f in store.facts(run_id, "risk.copyleft")]
    assert licenses and risks  # psycopg (LGPL) is in converge's closure
    lines = res.stdout.splitlines()

    def row(*cells: str) -> str | None:
        pattern = r"\s*│\s*".join(re.escape(c) for c in cells)
        return next((line for line in lines if re.search(rf"│ {pattern}\s*│", line)), None)

    for lic in licenses:
        assert row(lic["name"], lic["version"], lic["spdx"], lic["source"]), lic
    for risk in risks:
        path = " -> ".join(risk["path"])
        assert risk["path"][0] == "converge-engine"
        assert row(risk["name"], risk["version"], risk["spdx"], risk["copyleft"], path), risk
    counts = {c["spdx"] for c in licenses}
    assert all(row(spdx) for spdx in counts)  # the count per license


def test_a_report_is_shown_after_the_summary_without_cutting_a_value(tmp_path: Path) -> None:
    code, out, err = run_catalogue(tmp_path)
    assert code == 0, err
    assert out.index("facts per key") < out.index("Items (3)")
    assert f"app -> lib -> {LONG_NAME}" in out
    assert re.search(r"│ MIT\s+│\s+2 │", out) and re.search(r"│ LGPL-3.0-or-later\s+│\s+1 │", out)


def test_run_json_holds_the_facts_of_the_report_keys_and_facts_gives_every_key(
    tmp_path: Path,
) -> None:
    code, out, _ = run_catalogue(tmp_path, "--json")
    assert code == 0
    data = json.loads(out)
    assert set(data["facts"]) == {"item"}
    assert data["facts"]["item"][0] == {
        "name": LONG_NAME,
        "spdx": "MIT",
        "path": ["app", "lib", LONG_NAME],
    }
    _code, out, _ = run_catalogue(tmp_path, "--json", "--facts")
    assert json.loads(out)["facts"]["other"] == ["not in any report"]


def test_converge_report_renders_the_stored_run_in_four_formats(tmp_path: Path) -> None:
    assert run_catalogue(tmp_path)[0] == 0
    db = tmp_path / "c.db"
    run_id = only_run(db)

    def report(*args: str) -> str:
        res = runner.invoke(app, ["report", run_id, "--db", str(db), *args])
        assert res.exit_code == 0, res.output
        return res.stdout

    table = report()
    assert f"app -> lib -> {LONG_NAME}" in table and "Items per license" in table

    markdown = report("--format", "markdown")
    assert "## Items\n\n| name | spdx | path |\n|---|---|---|\n" in markdown
    assert f"| {LONG_NAME} | MIT | app -> lib -> {LONG_NAME} |" in markdown
    assert "| pipe\\|name | MIT | app |" in markdown  # a | in a value does not split a cell
    assert "| MIT | 2 |" in markdown

    rows = list(csv.reader(io.StringIO(report("--format", "csv", "--key", "item"))))
    assert rows[:3] == [
        ["# Items"],
        ["name", "spdx", "path"],
        [LONG_NAME, "MIT", f"app -> lib -> {LONG_NAME}"],
    ]
    # the key's two reports, each titled: a header and 3 rows, then a header and 2 rows
    assert rows[5:] == [
        [],
        ["# Items per license"],
        ["spdx", "count"],
        ["MIT", "2"],
        ["LGPL-3.0-or-later", "1"],
    ]

    data = json.loads(report("--format", "json"))
    assert data["run_id"] == run_id
    assert [r["title"] for r in data["reports"]] == ["Items", "Items per license"]
    assert data["reports"][0]["rows"][1] == {
        "name": "lib",
        "spdx": "LGPL-3.0-or-later",
        "path": "app -> lib",
    }
    assert data["facts"]["item"][0]["path"] == ["app", "lib", LONG_NAME]  # whole content


def test_report_key_without_a_report_entry_shows_every_field(tmp_path: Path) -> None:
    assert run_catalogue(tmp_path)[0] == 0
    db = tmp_path / "c.db"
    res = runner.invoke(
        app, ["report", only_run(db), "--db", str(db), "--key", "other", "-f", "csv"]
    )
    assert res.stdout == "content\nnot in any report\n"


def test_a_bad_format_or_run_is_a_one_line_error(tmp_path: Path) -> None:
    db = str(tmp_path / "c.db")
    open_store(db).close()  # a store without that run (a missing store is refused)
    res = runner.invoke(app, ["report", "nope", "--db", db, "--format", "pdf"])
    assert res.exit_code == 2 and "table, markdown, csv, json" in res.stderr
    res = runner.invoke(app, ["report", "nope", "--db", db])
    assert res.exit_code == 2 and "nope" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def fact(key: str, content: object, i: int) -> Fact:
    from engine import Provenance

    return Fact(f"{key}#{i}", key, content, Provenance("s", 1, f"p{i}", ()), 1.0)


def test_cells_keep_every_character_and_lists_are_joined() -> None:
    assert cell("x" * 500) == "x" * 500
    assert cell(["a", "b"], " -> ") == "a -> b"
    assert cell({"b": 1, "a": [1, 2]}) == '{"a": [1, 2], "b": 1}'
    assert cell(None) == "" and cell(True) == "yes" and cell(3) == "3"


def test_a_report_without_columns_shows_every_field_of_the_first_fact() -> None:
    facts = [fact("k", {"x": 1, "y": "two"}, 0), fact("k", {"x": 3}, 1), fact("j", 9, 2)]
    report = build_report(ReportSpec(key="k"), facts)
    assert report.columns == ("x", "y") and report.rows == (("1", "two"), ("3", ""))
    assert render_markdown([build_report(ReportSpec(key="none"), facts)]).endswith(
        "(no none facts)\n"
    )


def test_converge_facts_shows_every_content_whole(tmp_path: Path) -> None:
    assert run_catalogue(tmp_path)[0] == 0
    db = tmp_path / "c.db"
    res = runner.invoke(app, ["facts", only_run(db), "--db", str(db), "--key", "item"])
    assert res.exit_code == 0
    whole = f"name={LONG_NAME}, path=[app, lib, {LONG_NAME}], spdx=MIT"
    assert whole in res.stdout  # one line, nothing cut, as a person reads it


def test_the_allow_list_job_reports_every_violation_with_its_path_in_one_run(
    tmp_path: Path,
) -> None:
    job = ROOT / "examples" / "dependency_audit" / "allowlist.yaml"
    db = tmp_path / "allow.db"
    res = runner.invoke(app, ["run", str(job), "--db", str(db), "--json"])
    assert res.exit_code == 4, res.output
    data = json.loads(res.stdout)
    assert data["stop_reason"]["kind"] == "invariant_violated"
    violations = data["facts"]["policy.violation"]
    assert violations  # psycopg (LGPL) and certifi (MPL) are in converge's closure
    for v in violations:
        assert v["rule"] == "not allowed" and v["path"][0] == "converge-engine"
        described = f"{v['name']} ({v['spdx']}, not allowed): {' -> '.join(v['path'])}"
        assert described in data["stop_reason"]["reason"]
    assert f"{len(violations)} license policy violation(s)" in data["stop_reason"]["reason"]
    table = runner.invoke(
        app, ["report", only_run(db), "--db", str(db), "--key", "policy.violation"]
    )
    for v in violations:
        assert " -> ".join(v["path"]) in table.stdout
