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
from engine import Budget, Context, Engine, Proposal, suggestor
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


def _passes(bundle: Path, keys: Keys) -> str:
    """Checks that verify-bundle (and the independent verifier) pass ``bundle``;
    returns its text, for what it must or must not reveal."""
    code, out = _agree(bundle, keys)
    assert code == 0 and out["ok"], failed(out)
    return bundle.read_text(encoding="utf-8")


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
        "redactions",
        "checkpoint",
        "ledger entry",
        "ledger inclusion",
        "ledger checkpoint",
    ]
    code, out = _agree(fact_file, keys)
    assert code == 0 and out["ok"], failed(out)
    assert "fact inclusion" in [c["name"] for c in out["checks"]]
    # the human output: one line per check, with its name
    res = cli("verify-bundle", str(run_file), "--public-key", str(keys.pub))
    assert res.exit_code == 0
    assert "ok     event chain: 12 events chained (sha256)" in res.stdout
    assert "13/13 checks pass" in res.stdout


@pytest.fixture
def exported(tmp_path: Path) -> tuple[Keys, dict[str, Any], dict[str, Any], str]:
    """(keys, run bundle, one-fact bundle, a fact id) of a run on SQLite."""
    keys = make_keys(tmp_path / "keys")
    with store_at("sqlite", tmp_path) as (_url, store):
        signing(store, keys)
        record(store, 3)  # an earlier run: the ledger has more than one run
        result = record(store, 9)
        from audit.proofs import export_fact, export_run

        assert store.signer is not None
        fact_id = result.context.facts()[4].id
        run = export_run(store, store.signer, result.run_id)
        one = export_fact(store, store.signer, result.run_id, fact_id)
    return keys, run, one, fact_id


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _event_index(bundle: dict[str, Any], kind: str, has: str = "") -> int:
    return next(
        i for i, e in enumerate(bundle["events"]) if e["kind"] == kind and has in e["payload"]
    )


def _edit_event(b: dict[str, Any]) -> None:
    i = _event_index(b, "run_stopped")
    payload = json.loads(b["events"][i]["payload"])
    payload["cycles"] += 1
    b["events"][i]["payload"] = _canonical(payload)


def _edit_fact(b: dict[str, Any]) -> None:
    i = _event_index(b, "fact_promoted", "content-2")
    b["events"][i]["payload"] = b["events"][i]["payload"].replace("content-2", "content-X")


def _edit_initial_fact(b: dict[str, Any]) -> None:
    b["initial_facts"][0] = b["initial_facts"][0].replace('"content":"s"', '"content":"t"')


def _edit_proof(b: dict[str, Any]) -> None:
    b["ledger"]["proof"][0] = "00" * 32


def _edit_head(b: dict[str, Any]) -> None:
    b["signed_head"]["root"] = "ab" * 32


def _edit_signature(b: dict[str, Any]) -> None:
    sig = b["run"]["sig"]
    b["run"]["sig"] = ("0" if sig[0] != "0" else "1") + sig[1:]


def _remove_fact(b: dict[str, Any]) -> None:
    del b["events"][_event_index(b, "fact_promoted", "content-5")]


def _add_fact(b: dict[str, Any]) -> None:
    i = _event_index(b, "fact_promoted", "content-8")
    extra = dict(b["events"][i], payload=b["events"][i]["payload"].replace("#8", "#9"))
    b["events"].insert(i + 1, extra)


CHANGED = {"events root": "events", "event chain": "event seq"}
"""What an edited event fails: the signed events root, and the chain names its seq."""

MUTATIONS: dict[str, tuple[Callable[[dict[str, Any]], None], dict[str, str]]] = {
    # mutation: (edit, {failing check: words its detail names})
    "event": (_edit_event, CHANGED),
    "fact": (
        _edit_fact,
        {**CHANGED, "event chain": "(fact_promoted) changed", "facts root": "not the signed"},
    ),
    "initial fact": (
        _edit_initial_fact,
        {"facts": "initial fact 0 differs", "facts root": "not the signed facts root"},
    ),
    "proof node": (_edit_proof, {"ledger inclusion": "inclusion proof"}),
    "signed head": (
        _edit_head,
        {
            "signed head signature": "does not verify",
            "ledger inclusion": "signed head",
            "ledger checkpoint": "not the signed head's",
        },
    ),
    "signature": (_edit_signature, {"run statement signature": "does not verify"}),
    "fact removed": (
        _remove_fact,
        {**CHANGED, "facts": "fact removed", "facts root": "facts, the run statement says"},
    ),
    "fact added": (
        _add_fact,
        {**CHANGED, "facts": "fact added", "facts root": "facts, the run statement says"},
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


V1 = Path(__file__).parent / "fixtures" / "bundle-v1.json"
"""A run bundle written by the first exporter (converge.bundle/1: each event's whole
message, the facts listed again), with its public key beside it."""


def _v1_edit_event(b: dict[str, Any]) -> None:
    i = next(i for i, e in enumerate(b["events"]) if '"kind":"run_stopped"' in e["message"])
    message = json.loads(b["events"][i]["message"])
    message["payload"]["cycles"] += 1
    b["events"][i]["message"] = _canonical(message)


def _v1_edit_fact(b: dict[str, Any]) -> None:
    b["facts"][3] = b["facts"][3].replace("content-2", "content-X")


def _v1_remove_fact(b: dict[str, Any]) -> None:
    del b["facts"][5]


def _v1_add_fact(b: dict[str, Any]) -> None:
    b["facts"].append(b["facts"][-1].replace('"item#8"', '"item#9"'))


V1_MUTATIONS: dict[str, tuple[Callable[[dict[str, Any]], None], dict[str, str]]] = {
    "none": (lambda b: None, {}),
    "event": (_v1_edit_event, CHANGED),
    "fact": (_v1_edit_fact, {"facts": "fact 3 differs", "facts root": "not the signed"}),
    "fact removed": (
        _v1_remove_fact,
        {"facts": "fact removed", "facts root": "facts, the run statement says"},
    ),
    "fact added": (
        _v1_add_fact,
        {"facts": "fact added", "facts root": "facts, the run statement says"},
    ),
    "signature": (_edit_signature, {"run statement signature": "does not verify"}),
}


@pytest.mark.parametrize("kind", list(V1_MUTATIONS))
def test_a_bundle_of_the_first_format_still_verifies_and_its_mutations_are_named(
    kind: str, tmp_path: Path
) -> None:
    keys = Keys(key=tmp_path / "unused", pub=V1.with_suffix(".pub"))
    bundle = json.loads(V1.read_text(encoding="utf-8"))
    assert bundle["format"] == "converge.bundle/1"
    edit, expected = V1_MUTATIONS[kind]
    edit(bundle)
    code, out = _agree(write(tmp_path / "v1.json", bundle), keys)
    assert code == (1 if expected else 0)
    bad = failed(out)
    assert set(bad) == set(expected), bad
    for name, words in expected.items():
        assert words in bad[name], (name, bad[name])


def test_the_untouched_bundle_passes_and_carries_each_fact_once(
    exported: tuple[Keys, dict[str, Any], dict[str, Any], str], tmp_path: Path
) -> None:
    keys, run, _one, _fid = exported
    raw = _passes(write(tmp_path / "ok.json", run), keys)
    assert run["format"] == "converge.bundle/2"
    for k in range(9):  # in its fact_promoted event only
        assert raw.count(f"content-{k}") == 1


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
        "ledger checkpoint",
    }


def test_a_one_fact_bundle_verifies_and_reveals_no_other_fact(
    exported: tuple[Keys, dict[str, Any], dict[str, Any], str], tmp_path: Path
) -> None:
    keys, _run, one, fact_id = exported
    raw = _passes(write(tmp_path / "fact.json", one), keys)
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
        from audit.proofs import export_run

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


def _counting(store: Any, cycles: int) -> Engine:
    """One suggestor counting ``n`` up to 20, a fact a cycle, within ``cycles``."""

    @suggestor(name="up", dependencies=["n"])
    def up(ctx: Context) -> list[Proposal]:
        top = max(f.content for f in ctx.get("n"))
        return [Proposal("n", top + 1)] if top < 20 else []

    return Engine(store=store, budget=Budget(max_cycles=cycles)).register(up)


def test_a_resumed_run_with_its_checkpoint_and_a_fork_with_its_initial_facts_verify(
    tmp_path: Path,
) -> None:
    from audit.proofs import export_run

    keys = make_keys(tmp_path / "keys")
    with store_at("sqlite", tmp_path) as (_url, store):
        signing(store, keys)
        first = _counting(store, 3).run({"n": [0]})
        assert first.stop_reason.is_resumable()
        again = _counting(store, 3).resume_run(first.run_id, budget=Budget(max_cycles=6))
        assert again.stop_reason.is_resumable()  # cut again: its checkpoint is kept
        fork = _counting(store, 50).fork(first.run_id, 5)
        assert store.signer is not None
        legs = export_run(store, store.signer, first.run_id)
        forked = export_run(store, store.signer, fork.run_id)
    assert legs["checkpoint"] is not None
    assert len(forked["initial_facts"]) == 6  # n = 0..5, as the fork started
    for name, bundle in (("legs", legs), ("fork", forked)):
        code, out = _agree(write(tmp_path / f"{name}.json", bundle), keys)
        assert code == 0, failed(out)
    legs["checkpoint"] = legs["checkpoint"].replace('"n"', '"m"', 1)
    code, out = _agree(write(tmp_path / "legs-bad.json", legs), keys)
    assert code == 1 and set(failed(out)) == {"checkpoint"}
    assert "differs from the sha256 event seq" in failed(out)["checkpoint"]
    del forked["initial_facts"][2]
    code, out = _agree(write(tmp_path / "fork-bad.json", forked), keys)
    assert code == 1 and set(failed(out)) == {"facts", "facts root"}
    # a fork refers to its parent's facts (issue 46): checked against its forked_from
    assert "fact taken from the parent removed: 5 carried, the fork took 6" in failed(out)["facts"]
