"""``converge`` on the real examples: exit codes, --json, the audit store, the HITL flow."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from converge.cli import app
from engine import CycleBudgetExhausted, HitlGatePending, LoopDetected, parse_stop_reason
from examples.dependency_audit import Distribution, Inventory, installed_distributions

ROOT = Path(__file__).resolve().parent.parent
AUDIT_JOB = ROOT / "examples" / "dependency_audit" / "job.yaml"
OSCILLATOR_JOB = ROOT / "examples" / "oscillator" / "job.yaml"

runner = CliRunner()

# A synthetic environment with two packages no table can classify (for the HITL flow).
FAKE = [
    Distribution("app", "1.0", license_expression="MIT", requires=("lib", "enigma", "mystery")),
    Distribution("lib", "2.0", license="Apache 2.0"),
    Distribution("enigma", "0.2", classifiers=("License :: Other/Proprietary License",)),
    Distribution("mystery", "0.1", license="see LICENSE.txt"),
]
fake_inventory = Inventory(lambda: FAKE)


def invoke(*args: str) -> tuple[int, Any, str]:
    """Run the CLI; return the exit code, the parsed JSON stdout (or None) and stderr."""
    res = runner.invoke(app, list(args))
    try:
        data = json.loads(res.stdout)
    except json.JSONDecodeError:
        data = None
    return res.exit_code, data, res.stderr


def fake_job(tmp_path: Path) -> str:
    """The real audit job with the synthetic inventory in place of the real one."""
    text = AUDIT_JOB.read_text().replace(
        "examples.dependency_audit:inventory", "tests.test_cli_examples:fake_inventory"
    )
    text = text.replace("root: converge-engine", "root: app")
    path = tmp_path / "audit.yaml"
    path.write_text(text)
    return str(path)


def test_the_inventory_reads_this_environment_sorted_and_normalised() -> None:
    dists = installed_distributions()
    names = [d.name for d in dists]
    assert names == sorted(set(names))
    assert all(n == n.lower() and "_" not in n for n in names)
    converge = next(d for d in dists if d.name == "converge-engine")
    assert any(r.startswith("pydantic") for r in converge.requires)


def test_the_audit_of_this_environment_succeeds_or_waits_on_a_human() -> None:
    code, data, err = invoke("run", str(AUDIT_JOB), "--no-audit", "--json")
    assert data is not None, err
    reason = parse_stop_reason(data["stop_reason"])
    assert reason.is_success() or isinstance(reason, HitlGatePending), reason
    assert code == reason.exit_code and code in (0, 10)
    assert data["facts_count"] > 0


def test_the_audit_run_is_recorded_in_the_store(tmp_path: Path) -> None:
    from audit import open_store

    db = tmp_path / "tmp" / "converge.db"
    db.parent.mkdir()
    code, data, err = invoke("run", str(AUDIT_JOB), "--db", str(db), "--json")
    assert code in (0, 10), err
    run = open_store(str(db)).run(data["run_id"])
    assert run.job == "dependency-audit"
    assert run.kind == data["stop_reason"]["kind"]
    assert run.facts_root == data["facts_root"]


def test_the_oscillator_exhausts_its_cycle_budget() -> None:
    code, data, _ = invoke("run", str(OSCILLATOR_JOB), "--no-audit", "--json")
    assert code == 3
    assert parse_stop_reason(data["stop_reason"]) == CycleBudgetExhausted(
        cycles_executed=10, limit=10
    )


def test_the_oscillator_is_caught_as_a_loop_by_loop_detection(tmp_path: Path) -> None:
    job = tmp_path / "loop.yaml"
    job.write_text(
        OSCILLATOR_JOB.read_text() + "stop_conditions: [{type: loop_detection, window: 2}]\n"
    )
    code, data, _ = invoke("run", str(job), "--no-audit", "--json")
    assert code == 6
    reason = parse_stop_reason(data["stop_reason"])
    assert isinstance(reason, LoopDetected)
    assert reason.window == 2 and sorted(reason.pattern) == ["ping", "pong"]


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            "examples.dependency_audit:licenses",
            "examples.dependency_audit:licences",
            "suggestors.1: module 'examples.dependency_audit' has no attribute 'licences'",
        ),
        (
            "criteria:",
            "criterion:",
            "criterion: unknown key 'criterion' (did you mean 'criteria'?)",
        ),
        ("max_cycles: 20", "max_cycles: -1", "budget.max_cycles: Input should be greater"),
    ],
)
def test_a_broken_audit_job_is_a_one_line_error_naming_the_line(
    tmp_path: Path, old: str, new: str, expected: str
) -> None:
    text = AUDIT_JOB.read_text().replace(old, new)
    at = next(i for i, t in enumerate(text.splitlines(), 1) if new in t and "#" not in t)
    job = tmp_path / "audit.yaml"
    job.write_text(text)
    code, _, err = invoke("run", str(job), "--no-audit")
    assert code == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and f"audit.yaml:{at}: {expected}" in lines[0], err


def test_the_hitl_flow_end_to_end_with_the_cli(tmp_path: Path) -> None:
    db = str(tmp_path / "converge.db")
    job = fake_job(tmp_path)

    code, data, err = invoke("run", job, "--db", db, "--json")
    assert code == 10, err
    first = parse_stop_reason(data["stop_reason"])
    assert isinstance(first, HitlGatePending)
    assert first.summary == "Classify the license of enigma 0.2"

    code, pending, _ = invoke("gates", "--pending", "--json", "--db", db)
    assert code == 0
    assert [(g["gate_id"], g["status"]) for g in pending] == [(first.gate_id, "pending")]
    assert pending[0]["proposal"]["content"]["name"] == "enigma"

    # reject with a license: a human classification; the run goes on to the next gate
    code, data, err = invoke("reject", first.gate_id, "--by", "bob", "--reason", "MIT", "--db", db)
    assert code == 10, err
    code, pending, _ = invoke("gates", "--pending", "--json", "--db", db)
    assert [g["summary"] for g in pending] == ["Classify the license of mystery 0.1"]
    second = pending[0]["gate_id"]

    # approve: accepted as reviewed with an unknown license; every gate is decided
    code, data, err = invoke("approve", second, "--by", "alice", "--db", db, "--json")
    assert code == 0, err
    assert data["stop_reason"] == {
        "kind": "criteria_met",
        "criteria": ["all_classified", "risks_assessed"],
    }

    from audit import open_store

    store = open_store(db)
    licenses = {f.content["name"]: f.content for f in store.facts(data["run_id"], "license")}
    assert licenses["enigma"] == {
        "name": "enigma",
        "version": "0.2",
        "spdx": "MIT",
        "source": "human",
    }
    assert "mystery" not in licenses
    unknown = [f.content["name"] for f in store.facts(data["run_id"], "license.unknown")]
    assert unknown == ["mystery"]
    decided = {g.gate_id: (g.status, g.decided_by) for g in store.gates()}
    assert decided == {first.gate_id: ("rejected", "bob"), second: ("approved", "alice")}

    # a gate is decided once
    code, _, err = invoke("approve", second, "--by", "carol", "--db", db)
    assert code == 2 and "alice" in err


def test_the_readme_flow_pauses_on_the_vendored_component_and_approval_completes_it(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "converge.db")
    job = str(ROOT / "examples" / "dependency_audit" / "vendored.yaml")
    code, data, _ = invoke("run", job, "--db", db, "--json")
    assert code == 10
    reason = parse_stop_reason(data["stop_reason"])
    assert isinstance(reason, HitlGatePending)
    assert reason.summary == "Classify the license of legacy-left-pad 0.3.1"

    code, gates, _ = invoke("gates", "--pending", "--json", "--db", db)
    assert code == 0
    assert [g["gate_id"] for g in gates] == [reason.gate_id]

    code, data, _ = invoke("approve", reason.gate_id, "--by", "alice", "--db", db, "--json")
    assert code == 0
    assert data["stop_reason"]["kind"] == "criteria_met"
    code, gates, _ = invoke("gates", "--pending", "--json", "--db", db)
    assert gates == []
    code, _, err = invoke("approve", reason.gate_id, "--by", "bob", "--db", db)
    assert code == 2 and "already decided (approved by alice" in err
    code, report, _ = invoke("verify", "--all", "--db", db, "--json")
    assert report["ok"] is True and len(report["runs"]) == 1
    assert code == 0
