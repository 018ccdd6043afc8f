"""What a user still trips on after a week (issue 59), through the real ``converge``
as a process: ``converge checkpoint`` without the signing key, a witness told it is
trusting on first use, and a job file's errors all reported at once."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from audit import open_store
from tests.faultfixtures import run_cli
from tests.hitlfixtures import STORES, store_url_for
from tests.servicefixtures import write_job
from tests.test_third_day_cli import DONE_JOB

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(params=STORES)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh store of each kind."""
    with store_url_for(request.param, tmp_path) as url:
        yield str(url)


def cosign_args(note: Path, previous: Path, witness: Path, log: Path) -> list[str]:
    """``witness cosign`` of ``note`` with the witness's key and the log's verifier key."""
    return [
        *("witness", "cosign", "--checkpoint", str(note), "--previous", str(previous)),
        *("--key", str(witness / "converge.key"), "--log-key", str(log / "converge.vkey")),
    ]


def keys(path: Path, *, witness: bool = False) -> Path:
    """``converge keys generate --dir PATH`` (``--witness``): the folder."""
    made = run_cli(["keys", "generate", "--dir", str(path), *(["--witness"] if witness else [])])
    assert made.returncode == 0, made.stderr
    return path


# -- 9. converge checkpoint prints the last one kept, without a key ----------------------


def test_checkpoint_without_a_key_prints_the_last_one_signed_and_kept(
    store_url: str, tmp_path: Path
) -> None:
    log = keys(tmp_path / "log")
    job = write_job(tmp_path / "job.yaml", DONE_JOB)
    assert run_cli(["run", str(job), "--db", store_url]).returncode == 0

    none_yet = run_cli(["checkpoint", "--db", store_url], env={"CONVERGE_SIGNING_KEY": ""})
    first = run_cli(["checkpoint", "--db", store_url, "--signing-key", str(log / "converge.key")])
    kept = run_cli(["checkpoint", "--db", store_url], env={"CONVERGE_SIGNING_KEY": ""})
    assert run_cli(["run", str(job), "--db", store_url]).returncode == 0
    still = run_cli(["checkpoint", "--db", store_url], env={"CONVERGE_SIGNING_KEY": ""})
    second = run_cli(["checkpoint", "--db", store_url, "--signing-key", str(log / "converge.key")])
    (tmp_path / "1.note").write_text(first.stdout)
    proof = tmp_path / "1-2.proof"
    latest = run_cli(
        [
            "checkpoint",
            "--db",
            store_url,
            "--from",
            str(tmp_path / "1.note"),
            "--proof",
            str(proof),
        ],
        env={"CONVERGE_SIGNING_KEY": ""},
    )

    assert none_yet.returncode == 2
    assert "no checkpoint kept in this store yet: sign one with --signing-key" in none_yet.stderr
    assert first.returncode == 0 and first.stdout.count("\n— ") == 1, first.stderr
    # the note as signed, byte for byte, and no newer one is made up without a key
    assert kept.returncode == 0 and kept.stdout == first.stdout
    assert still.stdout == first.stdout
    assert latest.returncode == 0 and latest.stdout == second.stdout != first.stdout
    # the proof written without the key takes a witness from the first to the second
    witness = keys(tmp_path / "witness", witness=True)
    state = tmp_path / "state" / "last.note"
    state.parent.mkdir()
    for note, extra in ((tmp_path / "1.note", []), (tmp_path / "2.note", ["--proof", str(proof)])):
        note.write_text(second.stdout if note.name == "2.note" else first.stdout)
        cosigned = run_cli([*cosign_args(note, state, witness, log), *extra])
        assert cosigned.returncode == 0, cosigned.stderr


# -- 14. a witness starting over is told so ----------------------------------------------


def test_a_witness_whose_previous_is_missing_beside_its_state_is_warned_of_tofu(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "runs.db")
    log, witness = keys(tmp_path / "log"), keys(tmp_path / "witness", witness=True)
    assert (
        run_cli(["run", str(write_job(tmp_path / "job.yaml", DONE_JOB)), "--db", db]).returncode
        == 0
    )
    note = tmp_path / "cp.note"
    note.write_text(
        run_cli(["checkpoint", "--db", db, "--signing-key", str(log / "converge.key")]).stdout
    )
    folder = tmp_path / "witness-state"
    folder.mkdir()
    (folder / "notes.txt").write_text("not a checkpoint\n")

    def cosign(previous: Path) -> tuple[int, str]:
        done = run_cli(cosign_args(note, previous, witness, log))
        return done.returncode, done.stderr

    first = cosign(folder / "last.note")  # the first: nothing else of this witness there
    mistyped = cosign(folder / "lats.note")  # a typo: the state is beside it
    helped = run_cli(["witness", "cosign", "--help"], env={"COLUMNS": "200"})

    assert first == (0, ""), first
    code, warned = mistyped
    assert code == 0
    assert "warning: --previous" in warned and "lats.note does not exist" in warned
    assert "trust" in warned and "(TOFU)" in warned and "its folder holds last.note" in warned
    assert "notes.txt" not in warned
    assert "TOFU" in helped.stdout and "trust on first use" in " ".join(helped.stdout.split())


# -- 11. a job file's errors, every one at once ------------------------------------------

SEVERAL = (
    "name: several\n"
    "suggestors: [examples.oscillator:pingg, examples.oscillator:pong]\n"
    "criteria: [examples.oscillator:nothing]\n"
    "budgit: {max_cycles: 3}\n"
    "budget: {max_facts: many}\n"
)
"""Five lines, four mistakes: a misspelt suggestor, a criterion that is none, an
unknown key, a value of the wrong type."""


def test_every_error_of_a_job_file_is_reported_at_once_at_its_line(tmp_path: Path) -> None:
    job = tmp_path / "several.yaml"
    job.write_text(SEVERAL)
    references = tmp_path / "refs.yaml"  # a spec that validates, its references do not
    references.write_text(SEVERAL.replace("budgit: {max_cycles: 3}\n", "").replace("many", "9"))

    failed = run_cli(["run", str(job), "--db", str(tmp_path / "runs.db")])
    refs = run_cli(["run", str(references), "--no-audit"])

    assert failed.returncode == 2
    lines = failed.stderr.splitlines()
    assert lines == [
        f"error: {job}:4: budgit: unknown key 'budgit' (did you mean 'budget'?)",
        f"error: {job}:5: budget.max_facts: Input should be a valid integer, unable to parse "
        "string as an integer",
        f"error: {job}:2: suggestors.0: module 'examples.oscillator' has no attribute 'pingg' "
        "(did you mean 'ping'?)",
        f"error: {job}:3: criteria.0: module 'examples.oscillator' has no attribute 'nothing'",
    ], failed.stderr
    assert not (tmp_path / "runs.db").exists()  # nothing recorded, no store made
    assert refs.returncode == 2
    assert [line.split(": ", 2)[1] for line in refs.stderr.splitlines()] == [
        f"{references}:2",
        f"{references}:3",
    ], refs.stderr


# -- 13. a fork of a parent whose fact chunks fail verify is warned of -------------------


def test_a_fork_of_a_parent_failing_verify_warns_naming_the_check(
    store_url: str, tmp_path: Path
) -> None:
    oscillator = str(ROOT / "examples" / "oscillator" / "job.yaml")
    ran = run_cli(["run", oscillator, "--db", store_url, "--json"])
    parent = json.loads(ran.stdout)["run_id"]
    clean = run_cli(["fork", parent, "--at-cycle", "3", "--db", store_url])
    assert clean.returncode == 3 and "warning" not in clean.stderr, clean.stderr
    store = open_store(store_url)
    try:  # the fact chunks its checkpoint refers to, edited (not the chained events)
        with store.sql_engine.begin() as conn:
            edited = conn.execute(
                text(
                    "UPDATE fact_chunks SET data = replace(data, '\"ping\",4,', '\"ping\",44,') "
                    "WHERE run_id = :run AND first = 4"
                ),
                {"run": parent},
            ).rowcount
    finally:
        store.close()
    assert edited == 1

    checked = run_cli(["verify", parent, "--db", store_url])
    forked = run_cli(["fork", parent, "--at-cycle", "3", "--db", store_url, "--json"])

    assert checked.returncode == 1 and "fact chunks differ from the checkpoint" in checked.stdout
    assert forked.returncode == 3, forked.stderr
    [warning] = [line for line in forked.stderr.splitlines() if "warning" in line]
    assert f"run {parent} does not verify" in warning
    assert "fact chunks differ from the checkpoint" in warning
    assert f"converge verify {parent}" in warning
    # its facts are the chained ones: the same as the clean fork's
    fork = json.loads(forked.stdout)["run_id"]
    contents = [
        f["content"]
        for f in json.loads(run_cli(["facts", fork, "--db", store_url, "--json"]).stdout)
    ]
    assert 44 not in contents and contents[:5] == [0, 1, 2, 3, 4]
