"""What a new user still trips on at the command line on the second day (issue 45):
gates named by a prefix or by their run, the model a replay differs in, exit codes
kept under a closed pipe for reading commands, nothing recorded for a job whose
references name nothing, "did you mean" for a suggestor, YAML errors in our words
at the line they start, and the small ones (``schema -o``, plurals, store paths,
``diff``'s seconds, ``token list``, ``approve``'s default ``--by``, ``--detach``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from audit import open_store
from converge.cli import app, service
from engine import Budget, Engine
from tests.hitlfixtures import INITIAL, make_engine
from tests.jobfixtures import tick
from tests.realserve import converge_piped_to_nobody
from tests.webfixtures import VENDORED

runner = CliRunner()


def cli(*args: str, env: dict[str, str] | None = None) -> Result:
    return runner.invoke(app, list(args), env=env)


def paused_vendored(db: str) -> tuple[str, str]:
    """The vendored example run into ``db``, paused at its gate: (run id, gate id)."""
    res = cli("run", str(VENDORED), "--db", db, "--json")
    assert res.exit_code == 10, res.output
    run_id = json.loads(res.stdout)["run_id"]
    [gate] = json.loads(cli("gates", "--pending", "--json", "--db", db).stdout)
    return run_id, gate["gate_id"]


# -- 1. gate ids by a prefix, or by their run ------------------------------------------


@pytest.mark.parametrize(
    "named_as",
    ["gate prefix", "run prefix with the gate number", "run prefix", "run id"],
)
def test_approve_takes_a_gate_prefix_or_the_run_of_its_one_pending_gate(
    tmp_path: Path, named_as: str
) -> None:
    db = str(tmp_path / "v.db")
    run_id, gate_id = paused_vendored(db)
    given = {
        "gate prefix": gate_id[:-2],
        "run prefix with the gate number": f"{run_id[:6]}-g1",
        "run prefix": run_id[:8],
        "run id": run_id,
    }[named_as]

    res = cli("approve", given, "--by", "alice", "--value", "MIT", "--db", db)

    assert res.exit_code != 2, res.output
    assert f"approved gate {gate_id} as alice" in res.stderr
    assert cli("gates", "--pending", "--json", "--db", db).stdout.strip() == "[]"


def test_an_unknown_gate_names_the_gates_there_are(tmp_path: Path) -> None:
    db = str(tmp_path / "v.db")
    _, gate_id = paused_vendored(db)

    typo = cli("approve", gate_id[:-1] + "7", "--by", "alice", "--db", db)
    unknown = cli("approve", "nothing-like-it", "--by", "alice", "--db", db)

    assert typo.exit_code == 2 and f"did you mean {gate_id}?" in typo.stderr
    assert unknown.exit_code == 2 and f"pending gates: {gate_id}" in unknown.stderr


def test_a_prefix_of_several_gates_lists_them(tmp_path: Path) -> None:
    db = str(tmp_path / "two.db")
    store = open_store(db)
    for run_id in ("abc1", "abc2"):
        make_engine(store).run(INITIAL, run_id=run_id)
    store.close()

    res = cli("gates", "abc", "--history", "--db", db)

    assert res.exit_code == 2
    assert "names several pending gates" in res.stderr
    assert "abc1-g1" in res.stderr and "abc2-g1" in res.stderr


# -- 3. a closed pipe keeps the exit code of reading commands ---------------------------


@pytest.mark.parametrize(
    "command", [["verify", "--all"], ["show", "RUN"], ["show", "RUN", "--json"], ["runs"]]
)
def test_a_reading_command_exits_with_its_results_code_under_a_closed_pipe(
    tmp_path: Path, command: list[str]
) -> None:
    db = str(tmp_path / "v.db")
    run_id, _ = paused_vendored(db)
    args = [run_id if a == "RUN" else a for a in command]

    done = converge_piped_to_nobody(*args, "--db", db, cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr


# -- 7, 8. a job whose references name nothing; YAML errors -------------------------------


def test_a_misspelt_suggestor_records_nothing_and_says_which_was_meant(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text("name: typo\nsuggestors: [tests.jobfixtures:tik]\n")
    db = tmp_path / "converge.db"

    res = cli("run", str(job), "--db", str(db))

    assert res.exit_code == 2
    assert f"{job}:2: suggestors.0:" in res.stderr
    assert "has no attribute 'tik' (did you mean 'tick'?)" in " ".join(res.stderr.split())
    assert not db.exists()


@pytest.mark.parametrize(
    ("text", "where", "words"),
    [
        (
            "name: x\nbudget: {max_cycles: 3\nsuggestors: [a:b]\n",
            "job.yaml:2: invalid YAML at column 9:",
            "the '{' opened here is not closed by '}'",
        ),
        ("name: x\n\tsuggestors: [a:b]\n", "job.yaml:2: invalid YAML at column 1:", "a tab"),
        ("name: a: b\n", "job.yaml:1: invalid YAML at column 8:", "a ':' where no key"),
    ],
)
def test_a_yaml_error_is_in_our_words_where_it_starts(
    tmp_path: Path, text: str, where: str, words: str
) -> None:
    (tmp_path / "job.yaml").write_text(text)

    res = cli("run", str(tmp_path / "job.yaml"), "--no-audit")

    assert res.exit_code == 2
    message = " ".join(res.stderr.split())
    assert where in message and words in message, message
    assert "while parsing" not in message and "could not find expected" not in message


# -- 11. the small ones -------------------------------------------------------------------


def test_an_unknown_run_names_the_store_by_its_path_as_gate_errors_do(tmp_path: Path) -> None:
    db = str(tmp_path / "v.db")
    paused_vendored(db)

    run = cli("show", "nosuch", "--db", db)
    gate = cli("approve", "nosuch", "--by", "alice", "--db", db)

    assert run.exit_code == gate.exit_code == 2
    assert f"no run 'nosuch' in audit store {db}" in run.stderr
    assert f"no gate 'nosuch' in audit store {db}" in gate.stderr
    assert "file:" not in run.stderr


def test_schema_to_a_file_says_where_it_wrote(tmp_path: Path) -> None:
    target = tmp_path / "job.schema.json"

    res = cli("schema", "-o", str(target))

    assert res.exit_code == 0
    assert f"wrote the JSON Schema of job files to {target}" in " ".join(res.stdout.split())
    assert json.loads(target.read_text())["title"] == "converge job file"


def test_one_cycle_is_said_in_the_singular() -> None:
    result = Engine(budget=Budget(max_cycles=1)).register(tick).run()

    assert "stopped after 1 cycle:" in result.explain()


def test_approve_defaults_by_as_run_does(tmp_path: Path) -> None:
    db = str(tmp_path / "v.db")
    _, gate_id = paused_vendored(db)

    res = cli("approve", gate_id, "--value", "MIT", "--db", db, env={"CONVERGE_USER": "carol"})

    assert res.exit_code != 2, res.output
    assert f"approved gate {gate_id} as carol" in res.stderr


def test_approve_by_token_alone_decides_as_the_tokens_person(tmp_path: Path) -> None:
    db = str(tmp_path / "v.db")
    _, gate_id = paused_vendored(db)
    token = cli("token", "add", "dana", "--db", db).stdout.split()[-1]

    res = cli("approve", gate_id, "--value", "MIT", "--token", token, "--db", db)

    assert res.exit_code != 2, res.output
    assert f"approved gate {gate_id} as dana" in res.stderr


def test_token_list_shows_who_and_when_but_never_the_token(tmp_path: Path) -> None:
    db = str(tmp_path / "t.db")
    paused_vendored(db)
    token = cli("token", "add", "erin", "--role", "viewer", "--expires", "30d", "--db", db)
    secret = token.stdout.split()[-1]

    listed = cli("token", "list", "--db", db, "--json")

    assert listed.exit_code == 0, listed.output
    [row] = json.loads(listed.stdout)
    assert (row["name"], row["role"], row["revoked_at"]) == ("erin", "viewer", None)
    assert row["expires_at"] - row["created_at"] == pytest.approx(30 * 86400)
    table = cli("token", "list", "--db", db, env={"COLUMNS": "80"}).stdout
    assert "erin" in table and "viewer" in table
    assert secret not in listed.stdout + table


def test_approve_detach_without_a_broker_says_a_local_process_resumes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = str(tmp_path / "v.db")
    _, gate_id = paused_vendored(db)
    sent: list[str] = []
    monkeypatch.setattr(
        service.DetachedProcess, "send", lambda self, run_id, action: sent.append(run_id)
    )
    monkeypatch.delenv("CONVERGE_BROKER", raising=False)

    res = cli("approve", gate_id, "--by", "alice", "--value", "MIT", "--detach", "--db", db)

    assert res.exit_code == 0, res.output
    message = " ".join(res.stderr.split())
    assert "background `converge worker --run` process of this machine" in message
    assert "on a worker" not in message and len(sent) == 1


def test_diff_shows_the_seconds_and_cost_budgets_in_their_units(tmp_path: Path) -> None:
    db = str(tmp_path / "d.db")
    oscillator = str(Path(__file__).resolve().parent.parent / "examples/oscillator/job.yaml")
    parent = json.loads(cli("run", oscillator, "--db", db, "--json").stdout)["run_id"]
    fork = cli("fork", parent, "--at-cycle", "4", "--db", db, "--json")
    child = json.loads(fork.stdout)["run_id"]

    shown = cli("diff", parent, child, "--db", db, env={"COLUMNS": "120"}).stdout

    [seconds] = [line for line in shown.splitlines() if "budget seconds" in line]
    assert " ms" in seconds or " s" in seconds.replace("seconds", ""), seconds
