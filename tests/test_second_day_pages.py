"""The second day (issue 45, items 4, 5, 6, 9): evidence shown as a person reads it.

Through the real ``converge`` command: contents as ``key=value`` (not JSON), times in
ISO UTC (not epoch floats), budgets as their limits, gate histories without Python
reprs, the human's ``--value`` wherever the decision is shown, 80-column tables
that break no word, ``runs`` keeping status, cycles and start, and a paused run's
summary counting what waits at its gate apart. In Chromium: the gate page's
proposal as a key/value table and its lineage labels whole, the run page's report
tables, decision value and "resumed after gate" timeline, neither page wider than
the window; the docs site's job-file keys unbroken in a narrow window.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from typer.testing import CliRunner, Result

from audit.store import SqlRunStore
from converge.cli import app
from tests.browserfixtures import PNG_MAGIC, at_the_pending_gate, screenshots_dir
from tests.faultfixtures import opened
from tests.webfixtures import VENDORED

if TYPE_CHECKING:
    from playwright.sync_api import Page

runner = CliRunner()

ISO_UTC = re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\b")
EPOCH = re.compile(r"\b1\d{9}\.\d+")
BREAKS = re.compile(r"\s+|(?<=-)")


def cli(*args: str, width: int = 200) -> Result:
    return runner.invoke(app, list(args), env={"COLUMNS": str(width)})


def shown(*args: str, width: int = 200) -> str:
    """What ``converge ARGS`` prints at ``width`` columns; it must exit 0."""
    res = cli(*args, width=width)
    assert res.exit_code == 0, res.output
    return res.stdout


def paused(db: str) -> tuple[str, str]:
    """The vendored audit run into ``db``, paused at its gate: (run id, gate id)."""
    res = cli("run", str(VENDORED), "--db", db, "--json")
    assert res.exit_code == 10, res.output
    [gate] = json.loads(cli("gates", "--pending", "--json", "--db", db).stdout)
    return json.loads(res.stdout)["run_id"], gate["gate_id"]


def approved(tmp_path: Path) -> tuple[str, str, str]:
    """The vendored audit approved with ``--value MIT``: (db, run id, gate id)."""
    db = str(tmp_path / "v.db")
    run_id, gate = paused(db)
    res = cli("approve", gate, "--by", "carol", "--value", "MIT", "--db", db)
    assert res.exit_code == 0, res.output
    return db, run_id, gate


def test_pending_gates_and_facts_show_contents_as_key_value_pairs_not_json(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "v.db")
    run_id, _ = paused(db)
    gates = cli("gates", "--pending", "--db", db)
    facts = cli("facts", run_id, "--key", "package", "--db", db)
    assert "license.unknown: name=legacy-left-pad, version=0.3.1" in gates.stdout
    assert "name=legacy-left-pad" in facts.stdout
    for res in (gates, facts):
        assert res.exit_code == 0, res.output
        assert '{"' not in res.stdout and '": "' not in res.stdout
    # --json stays JSON
    [gate] = json.loads(cli("gates", "--pending", "--json", "--db", db).stdout)
    assert gate["proposal"]["content"]["name"] == "legacy-left-pad"


def test_events_show_iso_utc_times_readable_budgets_and_the_decisions_value(
    tmp_path: Path,
) -> None:
    db, run_id, _ = approved(tmp_path)
    out = shown("events", run_id, "--db", db, width=400)
    assert "budget={" not in out and "budget=cycles 20, facts 10000" in out
    assert ISO_UTC.search(out) and not EPOCH.search(out), out
    [decided] = [line for line in out.splitlines() if "gate_decided" in line]
    assert "by=carol" in decided and "spdx=MIT" in decided
    assert ISO_UTC.search(decided)


def test_gate_history_shows_iso_times_and_fields_not_python_dict_reprs(tmp_path: Path) -> None:
    db, _, gate = approved(tmp_path)
    out = shown("gates", gate, "--history", "--db", db, width=300)
    assert "{'" not in out and "None" not in out and "False" not in out
    assert "rules=(reason_required=reject)" in out
    assert "spdx=MIT" in out
    assert ISO_UTC.search(out) and not EPOCH.search(out), out


def test_show_gives_the_decisions_value_and_says_the_run_resumed_after_its_gate(
    tmp_path: Path,
) -> None:
    db, run_id, gate = approved(tmp_path)
    out = shown("show", run_id, "--db", db, width=400)
    text = " ".join(out.replace("│", " ").split())
    assert f"approved {gate} by carol, value" in text and "spdx=MIT" in text
    assert f"resumed after gate {gate}, approved by carol" in text
    assert "resumed from" not in text


def test_the_license_table_at_80_columns_breaks_no_word(tmp_path: Path) -> None:
    db, run_id, _ = approved(tmp_path)
    data = json.loads(cli("report", run_id, "--db", db, "--format", "json").stdout)
    licenses = data["reports"][0]
    values = [str(v) for row in licenses["rows"] for v in row.values()]
    pieces = {p for v in values for p in BREAKS.split(v) if p}
    out = shown("report", run_id, "--db", db, width=80)
    assert all(len(line) <= 80 for line in out.splitlines())
    table = out.split("Packages per license")[0]
    body = [line for line in table.splitlines() if line.startswith("│")]
    assert len(body) >= len(licenses["rows"])
    for line in body:
        for cell in line.strip("│").split("│"):
            for piece in BREAKS.split(cell.strip()):
                # a fragment such as "BSD-3-Cla" or "ression" is no piece of any value
                assert not piece or piece in pieces, (piece, line)


def test_runs_at_80_columns_shows_status_cycles_and_start(tmp_path: Path) -> None:
    db = str(tmp_path / "v.db")
    run_id, _ = paused(db)
    out = shown("runs", "--db", db, width=80)
    assert all(len(line) <= 80 for line in out.splitlines())
    header = next(line for line in out.splitlines() if "┃ run" in line)
    for column in ("status", "kind", "cycles", "started"):  # kind: the stop's (issue 59)
        assert f" {column} " in header
    row = next(line for line in out.splitlines() if run_id in line)
    assert "paused" in row and re.search(r"│\s+2 │ \d\d-\d\d \d\d:\d\d", row), row


def test_a_paused_runs_summary_counts_what_waits_at_its_gate_apart(tmp_path: Path) -> None:
    res = cli("run", str(VENDORED), "--db", str(tmp_path / "v.db"), width=400)
    assert res.exit_code == 10, res.output
    text = " ".join(res.stdout.replace("│", " ").split())
    assert "1 waiting for a human decision at gate" in text
    waiting = re.search(r"; (\d+) more proposals? of cycle 2 \(([^)]*)\)", text)
    assert waiting, text
    # the counts depend on the packages of the environment audited
    assert re.fullmatch(r"dependency: \d+, license: \d+", waiting.group(2)), waiting.group(2)
    assert "criterion all_classified unmet at the pause" in text


# -- the pages, in Chromium ---------------------------------------------------------

NO_OVERFLOW = "() => document.documentElement.scrollWidth <= document.documentElement.clientWidth"

LABELS_INSIDE = """() => [...document.querySelectorAll('#lineage svg g.node')].map(g => {
  const box = g.querySelector('rect').getBBox();
  return [...g.querySelectorAll('text')].map(t => {
    const b = t.getBBox();
    return {text: t.textContent, inside: b.x >= box.x && b.x + b.width <= box.x + box.width};
  });
}).flat()"""


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlRunStore]:
    """A SQLite store in ``tmp_path`` for the vendored audit (not conftest's two kinds)."""
    with opened(str(tmp_path / "gates.db")) as s:
        yield s


@pytest.mark.parametrize("width", [1280, 800])
def test_the_gate_page_shows_the_proposal_as_a_table_and_its_lineage_labels_whole(
    store: SqlRunStore,
    page: Page,
    tmp_path: Path,
    width: int,
) -> None:
    from playwright.sync_api import expect

    page.set_viewport_size({"width": width, "height": 900})
    with at_the_pending_gate(page, store):
        expect(page.locator("#proposal tr", has_text="name")).to_contain_text("legacy-left-pad")
        expect(page.locator("#proposal th")).to_have_text(["name", "version", "raw"])
        assert "{" not in page.locator("#proposal").inner_text()
        labels = page.evaluate(LABELS_INSIDE)
        assert labels and all(t["inside"] for t in labels), labels
        shown = " ".join(t["text"] for t in labels)
        assert "license.unknown (waiting)" in shown and "name=legacy-left-pad" in shown
        assert page.evaluate(NO_OVERFLOW)
        shot = screenshots_dir(tmp_path) / f"gate-{width}.png"
        page.screenshot(path=str(shot), full_page=True)
    assert shot.read_bytes()[:8] == PNG_MAGIC


def test_the_run_page_shows_report_tables_the_decisions_value_and_resumed_after_gate(
    store: SqlRunStore,
    page: Page,
    tmp_path: Path,
) -> None:
    from playwright.sync_api import expect

    with at_the_pending_gate(page, store):
        page.fill("#value", "MIT")
        page.click("#approve")
        expect(page.locator("#stop-kind")).to_have_text("criteria_met")
        expect(page.locator("#run-gates td.value")).to_contain_text("spdx=MIT")
        licenses = page.locator('table.report[data-key="license"]')
        row = licenses.locator("tr", has_text="legacy-left-pad")
        expect(row.locator("td")).to_have_text(["legacy-left-pad", "0.3.1", "MIT", "human"])
        expect(page.locator("h2.report").first).to_contain_text("Licenses")
        expect(page.locator("#timeline")).to_contain_text("approved by alice")
        expect(page.locator("#timeline")).to_contain_text("resumed after gate")
        expect(page.locator("#timeline")).not_to_contain_text("resumed from")
        assert page.evaluate(NO_OVERFLOW)
        shot = screenshots_dir(tmp_path) / "run-reports.png"
        page.screenshot(path=str(shot), full_page=True)
    assert shot.read_bytes()[:8] == PNG_MAGIC


# -- the docs site: job-file key names whole ---------------------------------------

ROOT = Path(__file__).resolve().parent.parent

BROKEN_KEYS = """() => [...document.querySelectorAll('.md-typeset table td:first-child code')]
  .filter(c => c.getClientRects().length > 1).map(c => c.textContent)"""


def test_the_job_file_reference_breaks_no_key_name_in_a_narrow_window(
    page: Page,
    tmp_path: Path,
) -> None:
    pytest.importorskip("mkdocs", reason="needs the docs extra")
    from playwright.sync_api import Route

    site = tmp_path / "site"
    build = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)]
    proc = subprocess.run(build, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]

    def local_only(route: Route) -> None:  # never the network (the theme's web fonts)
        if route.request.url.startswith("file:"):
            route.continue_()
        else:
            route.abort()

    page.route("**/*", local_only)
    page.set_viewport_size({"width": 700, "height": 900})
    page.goto((site / "job-files" / "index.html").as_uri())
    keys = page.locator(".md-typeset table td:first-child code")
    assert keys.count() > 20
    assert page.evaluate(BROKEN_KEYS) == []
    page.screenshot(path=str(screenshots_dir(tmp_path) / "job-files.png"), full_page=True)
