"""A human's license answer at the dependency audit's gate reaches its report.

``converge approve GATE --by carol --value MIT`` and ``converge reject GATE --by bob
--reason MIT`` are two ways of classifying the vendored component: both end as a
``license`` fact with source ``human``, the key the Licenses table reads
(docs/dependency-audit.md), on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from converge.cli import app
from tests.hitlfixtures import STORES, store_url_for
from tests.webfixtures import VENDORED

runner = CliRunner()

DECISIONS = {
    "approve --value": ["approve", "--by", "carol", "--value", "MIT"],
    "reject --reason": ["reject", "--by", "bob", "--reason", "MIT"],
}


def _cli(*args: str) -> str:
    res = runner.invoke(app, list(args), env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    return res.stdout


@pytest.mark.parametrize("decision", sorted(DECISIONS))
@pytest.mark.parametrize("kind", STORES)
def test_a_human_license_answer_is_in_the_licenses_table_with_source_human(
    kind: str, decision: str, tmp_path: Path
) -> None:
    with store_url_for(kind, tmp_path) as db:
        paused = runner.invoke(app, ["run", str(VENDORED), "--db", db, "--json"])
        assert paused.exit_code == 10, paused.output
        run_id = json.loads(paused.stdout)["run_id"]
        [gate] = json.loads(_cli("gates", "--pending", "--json", "--db", db))
        verb, *options = DECISIONS[decision]

        _cli(verb, gate["gate_id"], *options, "--db", db)
        markdown = _cli("report", run_id, "--db", db, "--format", "markdown")
        table = _cli("report", run_id, "--db", db)

    licenses = markdown.split("## Packages per license")[0]
    assert licenses.startswith("## Licenses: package, version, SPDX id, where the id came from")
    assert "| legacy-left-pad | 0.3.1 | MIT | human |" in licenses.splitlines()
    [row] = [line for line in table.splitlines() if "legacy-left-pad" in line]
    assert [cell.strip() for cell in row.strip("│ ").split("│")] == [
        "legacy-left-pad",
        "0.3.1",
        "MIT",
        "human",
    ]
    assert "Packages per license" in table
