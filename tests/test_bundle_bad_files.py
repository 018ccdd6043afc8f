"""A file that is no proof bundle (issue 40, item 5): ``converge verify-bundle`` and
the independent ``examples/verify_bundle.py`` exit 2 with one line saying why (the
field's path when one is wrong), never a traceback and never 1, which says that a
bundle of the right shape was altered."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from audit.proofs import export_fact, export_run
from tests.proofsfixtures import VERIFIER, Keys, cli, make_keys, record, signing, store_at

DIGITS = "9" * 100_000


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], Any]:
    """An edit setting the field at ``path`` (``events.2.cycle``) to ``value``."""

    def edit(bundle: dict[str, Any]) -> Any:
        *parents, last = path.split(".")
        node: Any = bundle
        for p in parents:
            node = node[int(p)] if isinstance(node, list) else node[p]
        node[int(last) if isinstance(node, list) else last] = value
        return bundle

    return edit


def _drop(path: str) -> Callable[[dict[str, Any]], Any]:
    def edit(bundle: dict[str, Any]) -> Any:
        *parents, last = path.split(".")
        node: Any = bundle
        for p in parents:
            node = node[int(p)] if isinstance(node, list) else node[p]
        del node[last]
        return bundle

    return edit


def _huge_number(bundle: dict[str, Any]) -> bytes:
    bundle["run"]["last_seq"] = "HUGE"
    return json.dumps(bundle).replace('"HUGE"', DIGITS).encode()


def _text(bundle: dict[str, Any]) -> bytes:
    return json.dumps(bundle).encode()


BAD: dict[str, tuple[str, Callable[[dict[str, Any]], Any], str]] = {
    # name: (which bundle, edit → the bundle or the file's bytes, what the line names)
    "deep nesting": ("run", lambda b: b"[" * 200_000 + b"]" * 200_000, "nested too deeply"),
    "huge number": ("run", _huge_number, "not a JSON proof bundle"),
    "events a string": ("run", _set("events", "[]"), "events"),
    "a cycle a string": ("run", _set("events.2.cycle", "1"), "events[2].cycle"),
    "a payload a number": ("run", _set("events.1.payload", 5), "events[1].payload"),
    "an event without hash": ("run", _drop("events.0.hash"), "events[0].hash"),
    "the ledger seq a string": ("run", _set("ledger.entry.seq", "12"), "ledger.entry.seq"),
    "no ledger": ("run", _drop("ledger"), "ledger"),
    "a proof node a number": ("run", _set("ledger.proof.0", 7), "ledger.proof[0]"),
    "the head size a bool": ("run", _set("signed_head.size", True), "signed_head.size"),
    "facts count a float": ("run", _set("run.facts_count", 9.0), "run.facts_count"),
    "initial facts an object": ("run", _set("initial_facts", {}), "initial_facts"),
    "no run statement": ("run", _drop("run"), "run"),
    "an unknown kind": ("run", _set("kind", "nope"), "kind"),
    "the fact index a string": ("fact", _set("fact.index", "0"), "fact.index"),
    "a fact without proof": ("fact", _drop("fact.proof"), "fact.proof"),
    "truncated": ("run", lambda b: _text(b)[: len(_text(b)) // 2], "not a JSON proof bundle"),
    "not UTF-8": ("run", lambda b: b"\xff\xfe\xfa" + _text(b), "not a JSON proof bundle"),
    "empty": ("run", lambda b: b"", "not a JSON proof bundle"),
    "a list": ("run", lambda b: b"[1, 2]", "not a proof bundle"),
}


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> tuple[Keys, dict[str, dict[str, Any]]]:
    """(keys, {"run": a run bundle, "fact": a one-fact bundle})."""
    tmp = tmp_path_factory.mktemp("bad-bundles")
    keys = make_keys(tmp / "keys")
    with store_at("sqlite", tmp) as (_url, store):
        signing(store, keys)
        result = record(store, 3)
        assert store.signer is not None
        run = export_run(store, store.signer, result.run_id)
        fact = export_fact(store, store.signer, result.run_id, result.context.facts()[1].id)
    return keys, {"run": run, "fact": fact}


def _write(path: Path, made: Any) -> Path:
    path.write_bytes(made if isinstance(made, bytes) else json.dumps(made).encode())
    return path


def _independent(bundle: Path, keys: Keys) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(VERIFIER), str(bundle), str(keys.pub)],
        capture_output=True,
        text=True,
        check=False,
        cwd="/",
    )


@pytest.mark.parametrize("bad", list(BAD))
def test_a_file_that_is_no_bundle_exits_2_with_one_line_naming_the_problem(
    bad: str, bundles: tuple[Keys, dict[str, dict[str, Any]]], tmp_path: Path
) -> None:
    keys, made = bundles
    which, edit, named = BAD[bad]
    path = _write(tmp_path / "bad.json", edit(copy.deepcopy(made[which])))
    res = cli("verify-bundle", str(path), "--public-key", str(keys.pub))
    assert res.exit_code == 2, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and named in lines[0], lines
    assert "Traceback" not in res.output
    other = _independent(path, keys)
    assert other.returncode == 2, other.stderr
    assert other.stdout == "" and "Traceback" not in other.stderr
    line = other.stderr.strip().splitlines()
    assert len(line) == 1 and named in line[0], line


def test_a_bundle_of_the_right_shape_that_was_altered_still_exits_1(
    bundles: tuple[Keys, dict[str, dict[str, Any]]], tmp_path: Path
) -> None:
    keys, made = bundles
    altered = copy.deepcopy(made["run"])
    altered["events"][1]["cycle"] += 1  # still an integer: the events root no longer fits
    path = _write(tmp_path / "altered.json", altered)
    res = cli("verify-bundle", str(path), "--public-key", str(keys.pub))
    assert res.exit_code == 1 and "FAILED events root" in res.output
    assert _independent(path, keys).returncode == 1
    untouched = _write(tmp_path / "untouched.json", made["fact"])
    assert cli("verify-bundle", str(untouched), "--public-key", str(keys.pub)).exit_code == 0
    assert _independent(untouched, keys).returncode == 0
