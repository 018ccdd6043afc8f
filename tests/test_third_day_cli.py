"""What a user still trips on after a week at the command line (issue 59), each
through the real ``converge`` as a process (:func:`tests.faultfixtures.run_cli`): the
commands a stopped run's summary ends with, and that they work; output piped to a file
that is not wrapped, its plurals and limits; help paragraphs flowed."""

from __future__ import annotations

import json
import re
import shlex
import sqlite3
from pathlib import Path
from typing import Any

from tests.faultfixtures import run_cli
from tests.hitlfixtures import SUGGESTORS
from tests.servicefixtures import write_job

DONE_JOB: dict[str, Any] = {
    "name": "third-day",
    "suggestors": [f"tests.hitlfixtures:{s.name}" for s in SUGGESTORS],
    "initial": {"seed": [1]},
    "report": [{"key": "package", "title": "Packages", "columns": ["value"]}],
}
"""A job that converges in three cycles, with one report table."""


def next_commands(stdout: str) -> list[list[str]]:
    """The commands of a summary's ``next:`` / ``or:`` lines, as argv (``#`` comments off)."""
    found = re.findall(r"^(?:next:|  or:) converge (.*)$", stdout, flags=re.M)
    return [shlex.split(line, comments=True) for line in found]


# -- 1. a run that stops says what comes next ------------------------------------------


def test_a_run_that_succeeds_ends_with_the_commands_for_its_findings_replay_and_export(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "runs.db")
    keys = run_cli(["keys", "generate", "--dir", str(tmp_path / "keys")])
    assert keys.returncode == 0, keys.stderr
    env = {"CONVERGE_SIGNING_KEY": str(tmp_path / "keys" / "converge.key")}
    job = write_job(tmp_path / "job.yaml", DONE_JOB)

    ran = run_cli(["run", str(job), "--db", db], env=env)

    assert ran.returncode == 0, ran.stderr
    run_id = re.search(r"run ([0-9a-f]{16})", ran.stdout)
    assert run_id is not None
    commands = next_commands(ran.stdout)
    assert [c[0] for c in commands] == ["report", "show", "replay", "export"], ran.stdout
    assert all(run_id.group(1) in c and c[-2:] == ["--db", db] for c in commands), commands
    assert ran.stdout.rstrip().splitlines()[-1].lstrip().startswith("or: converge export")
    # each works as printed (the bundle written under tmp_path, not the repository)
    export = commands[3]
    at = export.index("--proof") + 1
    export[at] = str(tmp_path / export[at])
    outcomes = [run_cli(command, env=env) for command in commands]
    assert [o.returncode for o in outcomes] == [0, 0, 0, 0], [o.stderr for o in outcomes]
    assert "Packages (2)" in outcomes[0].stdout
    assert "same:" in outcomes[2].stdout
    assert json.loads(Path(export[at]).read_text())["run"]["run_id"] == run_id.group(1)


def test_a_run_paused_at_a_gate_names_its_decisions_and_no_more(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    gated = {**DONE_JOB, "gates": [{"hitl": {"keys": ["license.unknown"]}}]}
    job = write_job(tmp_path / "job.yaml", gated)

    ran = run_cli(["run", str(job), "--db", db])

    assert ran.returncode == 10, ran.stderr
    commands = next_commands(ran.stdout)
    assert [c[0] for c in commands] == ["approve", "reject"]
    assert all(c[-2:] == ["--db", db] for c in commands)
    approved = run_cli([*commands[0][:3], "alice", *commands[0][4:]])
    assert approved.returncode == 0, approved.stderr
    assert [c[0] for c in next_commands(approved.stdout)] == ["report", "show", "replay", "export"]


# -- 10. output piped or redirected; plurals; limits; help ------------------------------

OSCILLATOR = str(Path(__file__).resolve().parent.parent / "examples" / "oscillator" / "job.yaml")
UNSET = {"COLUMNS": ""}
"""No ``$COLUMNS``: the output is a pipe, as ``converge ... > file`` or ``| grep``."""


def test_output_to_a_pipe_is_not_wrapped_and_counts_read_as_english(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    ran = run_cli(["run", OSCILLATOR, "--db", db], env=UNSET)
    assert ran.returncode == 3, ran.stderr
    run_id = json.loads(run_cli(["runs", "--json", "--db", db]).stdout)[0]["run_id"]

    lines = ran.stdout.splitlines()
    explain = next(i for i, line in enumerate(lines) if line.startswith("│ explain"))
    # the whole explanation on its line: the next row of the table follows it
    assert "[cycle_budget_exhausted, budget]." in lines[explain], ran.stdout
    assert lines[explain + 1].startswith("│ cycles"), ran.stdout
    assert max(map(len, lines)) > 80
    shown = run_cli(["show", run_id, "--db", db], env=UNSET)
    assert any(
        line.startswith("explain: cycle budget exhausted") and line.rstrip().endswith(".")
        for line in shown.stdout.splitlines()
    ), shown.stdout
    watched = run_cli(["watch", run_id, "--db", db], env=UNSET)
    assert "ping: 1 proposal," in watched.stdout and "1 proposals" not in watched.stdout
    assert "started: oscillator, 2 suggestors, 1 initial fact\n" in watched.stdout


def test_a_diff_names_limits_as_they_were_given(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    assert run_cli(["run", OSCILLATOR, "--db", db]).returncode == 3
    run_id = json.loads(run_cli(["runs", "--json", "--db", db]).stdout)[0]["run_id"]
    forked = run_cli(["fork", run_id, "--at-cycle", "2", "--max-facts", "6", "--db", db, "--json"])
    fork_id = json.loads(forked.stdout)["run_id"]

    diff = run_cli(["diff", run_id, fork_id, "--db", db], env=UNSET)

    assert "why: budget facts: limit 10000 in A, 6 in B" in diff.stdout, diff.stdout
    assert ".0 in" not in diff.stdout


def test_help_paragraphs_flow_to_the_width_of_the_terminal() -> None:
    wide = run_cli(["worker", "--help"], env={"COLUMNS": "200"})
    narrow = run_cli(["worker", "--help"], env={"COLUMNS": "60"})

    lines = [" ".join(line.strip(" │").split()) for line in wide.stdout.splitlines()]
    assert any(
        "renewed every third of --lease-seconds; a run whose lease expired" in line
        for line in lines
    ), wide.stdout
    # at 60 columns no line is cut short where the source broke it: each one (but a
    # paragraph's last) is filled to within a word of the width
    lines = [line.rstrip() for line in narrow.stdout.splitlines()]
    start = next(i for i, line in enumerate(lines) if "Each run it holds" in line)
    end = next(i for i in range(start, len(lines)) if not lines[i])
    assert end - start >= 3 and all(len(line) > 45 for line in lines[start : end - 1]), lines


# -- 3. facts and lineage name the decision behind a fact ------------------------------

VENDORED = str(
    Path(__file__).resolve().parent.parent / "examples" / "dependency_audit" / "vendored.yaml"
)


def decided_run(db: str) -> tuple[str, str]:
    """The vendored audit run into ``db``, its gate approved by alice with MIT and a
    reason: (run id, gate id)."""
    ran = run_cli(["run", VENDORED, "--db", db, "--json"])
    assert ran.returncode == 10, ran.stderr
    run_id = json.loads(ran.stdout)["run_id"]
    [gate] = json.loads(run_cli(["gates", "--pending", "--json", "--db", db]).stdout)
    decide = ["approve", gate["gate_id"], "--by", "alice", "--value", "MIT"]
    approved = run_cli([*decide, "--reason", "headers say MIT", "--db", db])
    assert approved.returncode == 0, approved.stderr
    return run_id, gate["gate_id"]


def test_facts_and_lineage_show_who_approved_a_fact_and_why(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    run_id, gate_id = decided_run(db)
    decision = f"gate {gate_id} approved by alice: headers say MIT"

    listed = run_cli(["facts", run_id, "--key", "license.unknown", "--db", db], env=UNSET)
    as_json = json.loads(run_cli(["facts", run_id, "--db", db, "--json"]).stdout)
    # the vendored component's license fact: its id's number counts the packages of
    # the environment before it (an extra that adds one moves it)
    [vendored] = [
        f["id"]
        for f in as_json
        if f["key"] == "license" and f["content"]["name"] == "legacy-left-pad"
    ]
    lineage = run_cli(["lineage", run_id, vendored, "--db", db], env=UNSET)

    [row] = [line for line in listed.stdout.splitlines() if "license.unknown#0" in line]
    assert decision in row, listed.stdout
    by_id = {f["id"]: f for f in as_json}
    assert by_id["license.unknown#0"]["decision"] == {
        "gate_id": gate_id,
        "status": "approved",
        "by": "alice",
        "reason": "headers say MIT",
        "decided_at": by_id["license.unknown#0"]["decision"]["decided_at"],
    }
    # the license fact the human's answer became: derived from the decision, named
    assert by_id[vendored]["after_decisions"][0]["gate_id"] == gate_id
    assert "decision" not in by_id["package#0"] and "after_decisions" not in by_id["package#0"]
    [node] = [line for line in lineage.stdout.splitlines() if "license.unknown#0" in line]
    assert decision in node, lineage.stdout


# -- 4. runs counted by category, kind and job ------------------------------------------


def test_runs_are_counted_by_category_kind_and_job(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    job = write_job(tmp_path / "job.yaml", DONE_JOB)
    for args in (["run", OSCILLATOR], ["run", OSCILLATOR], ["run", str(job)]):
        run_cli([*args, "--db", db])

    by_category = json.loads(run_cli(["runs", "--by", "category", "--json", "--db", db]).stdout)
    by_kind = json.loads(run_cli(["runs", "--by", "kind", "--json", "--db", db]).stdout)
    by_job = run_cli(["runs", "--by", "job", "--db", db], env=UNSET)
    listed = json.loads(run_cli(["runs", "--json", "--db", db]).stdout)
    table = run_cli(["runs", "--db", db], env=UNSET)
    bad = run_cli(["runs", "--by", "colour", "--db", db])

    assert by_category == [{"category": "budget", "runs": 2}, {"category": "success", "runs": 1}]
    assert by_kind == [
        {"kind": "cycle_budget_exhausted", "runs": 2},
        {"kind": "converged", "runs": 1},
    ]
    assert re.search(r"│ oscillator +│ +2 │", by_job.stdout), by_job.stdout
    assert re.search(r"│ third-day +│ +1 │", by_job.stdout), by_job.stdout
    # one name for the stop's kind: the table's column is the JSON's field
    header = next(line for line in table.stdout.splitlines() if "┃ run" in line)
    assert "┃ kind" in header and "┃ stop" not in header
    assert {r["kind"] for r in listed} == {"cycle_budget_exhausted", "converged"}
    assert bad.returncode == 2 and "--by 'colour' is not one of: category, kind, job" in bad.stderr


# -- 5. the cycle budget's explanation: progress or repeats ------------------------------


def test_a_spent_cycle_budget_is_explained_by_what_the_last_cycles_did(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    job = {"initial": {"n": [0]}, "budget": {"max_cycles": 4}}
    climbing = write_job(
        tmp_path / "climb.yaml",
        {"name": "climb", "suggestors": ["tests.thirddayjobs:climb"], **job},
    )
    echoing = write_job(
        tmp_path / "echo.yaml", {"name": "echo", "suggestors": ["tests.thirddayjobs:echo"], **job}
    )

    climbed = run_cli(["run", str(climbing), "--db", db], env=UNSET)
    echoed = run_cli(["run", str(echoing), "--db", db], env=UNSET)
    unrecorded = run_cli(["run", str(climbing), "--no-audit"], env=UNSET)

    assert climbed.returncode == echoed.returncode == 3
    progress = "progress in each of the last 4 cycles (1 new fact each): more cycles may help"
    assert progress in climbed.stdout and "scillating" not in climbed.stdout
    assert progress in unrecorded.stdout
    repeats = "facts repeat: the last 4 cycles re-proposed 10 facts already there. Oscillating"
    assert repeats in echoed.stdout and "more cycles may help" not in echoed.stdout
    runs = {
        r["job"]: r["run_id"] for r in json.loads(run_cli(["runs", "--json", "--db", db]).stdout)
    }
    shown = json.loads(run_cli(["show", runs["climb"], "--db", db, "--json"]).stdout)
    assert progress in shown["explain"]
    assert (
        repeats
        in json.loads(run_cli(["show", runs["echo"], "--db", db, "--json"]).stdout)["explain"]
    )
    # and the run needed only that: two more cycles, and it converged
    more = run_cli(["resume", runs["climb"], "--add-cycles", "3", "--db", db])
    assert more.returncode == 0 and "converged" in more.stdout, more.stdout


# -- 7. a tampered run is shown with a warning ------------------------------------------


def test_facts_report_and_show_warn_of_a_run_altered_in_its_store(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    run_id, _ = decided_run(db)
    intact = [run_cli([c, run_id, "--db", db]) for c in ("facts", "report", "show")]
    assert all(o.returncode == 0 and "warning" not in o.stderr for o in intact)

    with sqlite3.connect(db) as conn:  # the human's MIT, rewritten in the fact's event
        changed = conn.execute(
            'UPDATE audit_events SET payload = replace(payload, \'"spdx":"MIT"\', '
            "'\"spdx\":\"Apache-2.0\"') WHERE run_id = ? AND kind = 'fact_promoted' "
            "AND payload LIKE '%legacy-left-pad%'",
            (run_id,),
        ).rowcount
    assert changed
    facts, report = (run_cli([c, run_id, "--db", db]) for c in ("facts", "report"))
    with sqlite3.connect(db) as conn:  # and the last event of its chain
        conn.execute(
            "UPDATE audit_events SET ts = ts + 1 WHERE run_id = ? AND seq = "
            "(SELECT max(seq) FROM audit_events WHERE run_id = ?)",
            (run_id, run_id),
        )
    show = run_cli(["show", run_id, "--db", db])

    for outcome, why in (
        (facts, "its facts do not hash to the facts root it recorded"),
        (report, "its facts do not hash to the facts root it recorded"),
        (show, "does not hash to its recorded hash"),
    ):
        assert outcome.returncode == 0 and "Apache-2.0" in facts.stdout
        [warning] = [line for line in outcome.stderr.splitlines() if "warning" in line]
        assert f"run {run_id} may have been altered" in warning and why in warning, warning
        assert f"converge verify {run_id}" in warning
    assert run_cli(["verify", run_id, "--db", db]).returncode == 1


# -- 6. the demo replays the same after an extra is installed ---------------------------

DEMO = Path(__file__).resolve().parent.parent / "examples" / "dependency_audit"


def test_the_demo_replays_the_same_in_an_environment_that_changed_since(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    ran = run_cli(["run", str(DEMO / "job.yaml"), "--db", db, "--json"])
    assert ran.returncode == 0, ran.stderr
    run_id = json.loads(ran.stdout)["run_id"]
    # the environment changed since: another version of a package of the closure
    # (an upgrade an extra's install brings), found first on the path
    shadow = tmp_path / "site" / "rich-99.0.0.dist-info"
    shadow.mkdir(parents=True)
    (shadow / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: rich\nVersion: 99.0.0\nLicense-Expression: MIT\n"
    )
    root = str(Path(__file__).resolve().parent.parent)
    changed = {"PYTHONPATH": f"{root}:{tmp_path / 'site'}"}
    live = run_cli(["run", str(DEMO / "job.yaml"), "--no-audit", "--json", "--facts"], env=changed)
    assert any(
        p["name"] == "rich" and p["version"] == "99.0.0"
        for p in json.loads(live.stdout)["facts"]["package"]
    ), "the shadowing distribution is not seen: the test shows nothing"

    replayed = run_cli(["replay", run_id, "--db", db], env=changed)

    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "played back: inventory" in replayed.stdout and "same:" in replayed.stdout
    for job in ("job.yaml", "vendored.yaml", "reviewed.yaml"):
        assert "nondeterministic: [inventory]" in (DEMO / job).read_text(), job


# -- 15. a license is set with approve --value; reject is a refusal ---------------------


def test_the_docs_classify_with_approve_value_and_refuse_with_reject(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parent.parent
    texts = {p: p.read_text() for p in [root / "README.md", *root.glob("docs/*.md")]}
    texts |= {p: p.read_text() for p in DEMO.glob("*.yaml")}
    spdx_reason = re.compile(r"reject \S+ --by \S+ --reason (MIT|Apache|BSD|GPL)")
    assert not [p.name for p, t in texts.items() if spdx_reason.search(t)]
    readme = texts[root / "README.md"]
    approve = re.search(r"^converge approve GATE (--by \S+ --value MIT)", readme, flags=re.M)
    assert approve is not None
    db = str(tmp_path / "runs.db")
    paused = run_cli(["run", VENDORED, "--db", db, "--json"])
    run_id = json.loads(paused.stdout)["run_id"]
    [gate] = json.loads(run_cli(["gates", "--pending", "--json", "--db", db]).stdout)

    done = run_cli(["approve", gate["gate_id"], *approve.group(1).split(), "--db", db])

    assert done.returncode == 0, done.stderr
    report = json.loads(run_cli(["report", run_id, "--db", db, "--format", "json"]).stdout)
    rows = [r for t in report["reports"] if t["key"] == "license" for r in t["rows"]]
    assert any(r.get("name") == "legacy-left-pad" and r.get("spdx") == "MIT" for r in rows), rows
