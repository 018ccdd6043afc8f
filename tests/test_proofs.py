"""Proof bundles (issue 26): exported on SQLite and PostgreSQL, verified offline with
the public key alone once the store is gone; every kind of tampering named; a
one-fact bundle that reveals no other fact; the independent verifier agrees."""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from audit import open_store
from tests.proofsfixtures import (
    Keys,
    cli,
    failed,
    make_keys,
    record,
    signing,
    store_at,
    verify_cli,
    verify_independent,
    write,
)


def _agree(bundle: Path, keys: Keys) -> tuple[int, dict[str, Any]]:
    """verify-bundle's result, after checking the independent verifier agrees on
    the exit code and on each check."""
    code, result = verify_cli(bundle, keys)
    other_code, other = verify_independent(bundle, keys)
    assert other_code == code, (other, result)
    assert other == [(c["name"], c["ok"]) for c in result["checks"]]
    return code, result


@pytest.mark.parametrize("backend", ["sqlite", "pg"])
def test_a_bundle_verifies_offline_with_the_store_deleted(backend: str, tmp_path: Path) -> None:
    keys = make_keys(tmp_path / "keys")
    run_file, fact_file = tmp_path / "run.json", tmp_path / "fact.json"
    with store_at(backend, tmp_path) as (url, store):
        result = record(signing(store, keys), 7)
        fact_id = result.context.facts()[3].id
        store.close()
        for args in ([], ["--fact", fact_id]):
            out = run_file if not args else fact_file
            res = cli(
                "export", result.run_id, "--proof", str(out), *args,
                "--signing-key", str(keys.key), "--db", url,
            )  # fmt: skip
            assert res.exit_code == 0, res.output
        if backend == "pg":
            engine = create_engine(url)
            with engine.begin() as conn:
                schema = conn.execute(text("SELECT current_schema()")).scalar()
                conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
            engine.dispose()
    if backend == "sqlite":
        for f in tmp_path.glob("audit.db*"):
            f.unlink()
    assert not list(tmp_path.glob("audit.db*"))
    code, out = _agree(run_file, keys)
    assert code == 0 and out["ok"], failed(out)
    names = [c["name"] for c in out["checks"]]
    assert names == [
        "format",
        "signed head signature",
        "run statement signature",
        "facts root signature",
        "events root",
        "event chain",
        "facts",
        "facts root",
        "checkpoint",
        "ledger entry",
        "ledger inclusion",
    ]
    code, out = _agree(fact_file, keys)
    assert code == 0 and out["ok"], failed(out)
    assert "fact inclusion" in [c["name"] for c in out["checks"]]
    # the human output: one line per check, with its name
    res = cli("verify-bundle", str(run_file), "--public-key", str(keys.pub))
    assert res.exit_code == 0
    assert "ok     event chain: 12 events chained (sha256)" in res.stdout
    assert "11/11 checks pass" in res.stdout


@pytest.fixture
def exported(tmp_path: Path) -> tuple[Keys, dict[str, Any], dict[str, Any], str]:
    """(keys, run bundle, one-fact bundle, a fact id) of a run on SQLite."""
    keys = make_keys(tmp_path / "keys")
    with store_at("sqlite", tmp_path) as (_url, store):
        signing(store, keys)
        record(store, 3)  # an earlier run: the ledger has more than one run
        result = record(store, 9)
        from audit.bundles import export_fact, export_run

        assert store.signer is not None
        fact_id = result.context.facts()[4].id
        run = export_run(store, store.signer, result.run_id)
        one = export_fact(store, store.signer, result.run_id, fact_id)
    return keys, run, one, fact_id


def _event_index(bundle: dict[str, Any], kind: str) -> int:
    return next(
        i for i, e in enumerate(bundle["events"]) if json.loads(e["message"])["kind"] == kind
    )


def _edit_event(b: dict[str, Any]) -> None:
    i = _event_index(b, "run_stopped")
    message = json.loads(b["events"][i]["message"])
    message["payload"]["cycles"] += 1
    b["events"][i]["message"] = json.dumps(message, sort_keys=True, separators=(",", ":"))


def _edit_fact(b: dict[str, Any]) -> None:
    b["facts"][3] = b["facts"][3].replace("content-2", "content-X")


def _edit_proof(b: dict[str, Any]) -> None:
    b["ledger"]["proof"][0] = "00" * 32


def _edit_head(b: dict[str, Any]) -> None:
    b["signed_head"]["root"] = "ab" * 32


def _edit_signature(b: dict[str, Any]) -> None:
    sig = b["run"]["sig"]
    b["run"]["sig"] = ("0" if sig[0] != "0" else "1") + sig[1:]


def _remove_fact(b: dict[str, Any]) -> None:
    del b["facts"][5]


def _add_fact(b: dict[str, Any]) -> None:
    b["facts"].append(b["facts"][-1].replace('"item#8"', '"item#9"'))


MUTATIONS: dict[str, tuple[Callable[[dict[str, Any]], None], dict[str, str]]] = {
    # mutation: (edit, {failing check: words its detail names})
    "event": (_edit_event, {"events root": "events", "event chain": "event seq"}),
    "fact": (_edit_fact, {"facts": "fact 3 differs", "facts root": "not the signed facts root"}),
    "proof node": (_edit_proof, {"ledger inclusion": "inclusion proof"}),
    "signed head": (
        _edit_head,
        {"signed head signature": "does not verify", "ledger inclusion": "signed head"},
    ),
    "signature": (_edit_signature, {"run statement signature": "does not verify"}),
    "fact removed": (
        _remove_fact,
        {"facts": "fact removed", "facts root": "facts, the run statement says"},
    ),
    "fact added": (
        _add_fact,
        {"facts": "fact added", "facts root": "facts, the run statement says"},
    ),
}


@pytest.mark.parametrize("kind", list(MUTATIONS))
def test_every_mutation_is_detected_and_named(
    kind: str, exported: tuple[Keys, dict[str, Any], dict[str, Any], str], tmp_path: Path
) -> None:
    keys, run, _one, _fid = exported
    edit, expected = MUTATIONS[kind]
    bundle = copy.deepcopy(run)
    edit(bundle)
    code, out = _agree(write(tmp_path / f"{kind}.json", bundle), keys)
    assert code == 1 and not out["ok"]
    bad = failed(out)
    assert set(bad) == set(expected), bad
    for name, words in expected.items():
        assert words in bad[name], (name, bad[name])


def test_the_untouched_bundle_passes(
    exported: tuple[Keys, dict[str, Any], dict[str, Any], str], tmp_path: Path
) -> None:
    keys, run, _one, _fid = exported
    code, out = _agree(write(tmp_path / "ok.json", run), keys)
    assert code == 0 and out["ok"]


def test_another_public_key_fails_every_signature(
    exported: tuple[Keys, dict[str, Any], dict[str, Any], str], tmp_path: Path
) -> None:
    _keys, run, _one, _fid = exported
    other = make_keys(tmp_path / "other")
    code, out = _agree(write(tmp_path / "run.json", run), other)
    assert code == 1
    assert set(failed(out)) == {
        "signed head signature",
        "run statement signature",
        "facts root signature",
    }


def test_a_one_fact_bundle_verifies_and_reveals_no_other_fact(
    exported: tuple[Keys, dict[str, Any], dict[str, Any], str], tmp_path: Path
) -> None:
    keys, _run, one, fact_id = exported
    path = write(tmp_path / "fact.json", one)
    code, out = _agree(path, keys)
    assert code == 0 and out["ok"], failed(out)
    raw = path.read_text()
    assert fact_id == "item#3" and "content-3" in raw  # the fact itself
    for k in (0, 1, 2, 4, 5, 6, 7, 8):
        assert f"content-{k}" not in raw
    assert "events" not in one and "facts" not in one and "checkpoint" not in one
    assert f'"item#{5}"' not in raw and "seed" not in raw  # nor another fact's id or key
    # tampered: the fact's content, or a node of its audit path
    for edit in (
        lambda b: b["fact"].__setitem__("text", b["fact"]["text"].replace("content-3", "x")),
        lambda b: b["fact"]["proof"].__setitem__(1, "11" * 32),
        lambda b: b["fact"].__setitem__("index", b["fact"]["index"] + 1),
    ):
        bad = copy.deepcopy(one)
        edit(bad)
        code, out = _agree(write(tmp_path / "bad.json", bad), keys)
        assert code == 1 and set(failed(out)) == {"fact inclusion"}


def test_export_refuses_without_a_key_and_names_an_unknown_fact(tmp_path: Path) -> None:
    keys = make_keys(tmp_path / "keys")
    url = str(tmp_path / "audit.db")
    with store_at("sqlite", tmp_path) as (_url, store):
        result = record(store, 2)
    env = os.environ.pop("CONVERGE_SIGNING_KEY", None)
    try:
        res = cli("export", result.run_id, "--proof", str(tmp_path / "b.json"), "--db", url)
        assert res.exit_code == 2 and "no signing key" in res.output
    finally:
        if env is not None:
            os.environ["CONVERGE_SIGNING_KEY"] = env
    res = cli(
        "export", result.run_id, "--fact", "nope#0", "--proof", str(tmp_path / "b.json"),
        "--signing-key", str(keys.key), "--db", url,
    )  # fmt: skip
    assert res.exit_code == 2 and "has no fact 'nope#0'" in res.output
    # a run that stopped unsigned: the bundle has no stop-time signature, and verifies
    res = cli(
        "export", result.run_id, "--proof", str(tmp_path / "b.json"),
        "--signing-key", str(keys.key), "--db", url,
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    code, out = _agree(tmp_path / "b.json", keys)
    assert code == 0 and "facts root signature" not in [c["name"] for c in out["checks"]]


def test_a_keyed_store_exports_a_bundle_whose_events_the_signed_root_covers(
    tmp_path: Path,
) -> None:
    keys = make_keys(tmp_path / "keys")
    store = open_store(str(tmp_path / "audit.db"), key="an-hmac-key")
    try:
        result = record(signing(store, keys), 4)
        from audit.bundles import export_run

        assert store.signer is not None
        bundle = export_run(store, store.signer, result.run_id)
    finally:
        store.close()
    code, out = _agree(write(tmp_path / "k.json", bundle), keys)
    assert code == 0, failed(out)
    chain = next(c for c in out["checks"] if c["name"] == "event chain")
    assert "hmac-sha256 chain needs the secret key" in chain["detail"]
    _edit_event(bundle)
    code, out = _agree(write(tmp_path / "k2.json", bundle), keys)
    assert code == 1 and set(failed(out)) == {"events root"}


def test_verify_bundle_refuses_a_file_that_is_not_a_bundle(tmp_path: Path) -> None:
    keys = make_keys(tmp_path / "keys")
    junk = tmp_path / "junk.json"
    junk.write_text("[1, 2")
    res = cli("verify-bundle", str(junk), "--public-key", str(keys.pub))
    assert res.exit_code == 2 and "is not a JSON proof bundle" in res.output
    res = cli("verify-bundle", str(junk), "--public-key", str(tmp_path / "none.pub"))
    assert res.exit_code == 2 and "cannot read the public key" in res.output
