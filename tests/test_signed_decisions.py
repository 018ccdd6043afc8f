"""Signed decisions (issue 29, part B), on SQLite and PostgreSQL: a person registers
an Ed25519 public key (``converge user add NAME --public-key FILE``) and signs
their decisions (``converge approve/reject --sign-with KEY``, or through the
inbox's API with the key kept on their machine: ``--server URL``). The signed
statement is in the chained decision event; ``verify`` checks every one against
the person's registered key, and names the gate when an edited decision, or one
signed with another person's key, fails — even after the store was re-chained
with its own key (the operator).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from audit import KEY_ENV, open_store
from audit.people import add_token
from audit.signing import generate_keys, load_signer
from converge.web import create_app
from tests.keyfixtures import (
    HOOK,
    KEY,
    STORES,
    cli,
    rechain,
    run_gated,
    snapshot,
    sql,
    store_url,
)
from tests.proofsfixtures import Keys, verify_independent
from tests.webfixtures import served


@pytest.fixture(params=STORES)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with store_url(request.param, tmp_path) as u:
        yield u


@pytest.fixture
def keys(tmp_path: Path) -> dict[str, tuple[Path, Path]]:
    """Key pairs (private, public) of alice and bob."""
    return {name: generate_keys(tmp_path / name) for name in ("alice", "bob")}


def _register(url: str, keys: dict[str, tuple[Path, Path]]) -> None:
    for name, (_key, pub) in keys.items():
        res = cli("user", "add", name, "--public-key", str(pub), "--db", url)
        assert res.exit_code == 0, res.output


def _payload(url: str, run_id: str, kind: str) -> dict[str, Any]:
    [(text,)] = sql(
        url, "SELECT payload FROM audit_events WHERE run_id = :r AND kind = :k", r=run_id, k=kind
    )
    payload: dict[str, Any] = json.loads(text)
    return payload


def _set_payload(url: str, run_id: str, kind: str, payload: dict[str, Any]) -> None:
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    sql(
        url,
        "UPDATE audit_events SET payload = :p WHERE run_id = :r AND kind = :k",
        p=text,
        r=run_id,
        k=kind,
    )


def _failure(url: str, run_id: str) -> str:
    res = cli("verify", run_id, "--db", url, "--json")
    assert res.exit_code == 1, res.output
    [report] = json.loads(res.stdout)["runs"]
    return str(report["reason"])


def test_signed_votes_and_decisions_are_chained_and_verify(
    url: str, tmp_path: Path, keys: dict[str, tuple[Path, Path]]
) -> None:
    gate = run_gated(url, tmp_path, required=2, extra=HOOK)
    run_id = gate.rsplit("-g", 1)[0]
    _register(url, keys)

    first = cli("approve", gate, "--by", "alice", "--value", "MIT", "--sign-with",
                str(keys["alice"][0]), "--db", url)  # fmt: skip
    second = cli("approve", gate, "--by", "bob", "--value", "MIT", "--reason", "checked",
                 "--sign-with", str(keys["bob"][0]), "--db", url)  # fmt: skip

    assert first.exit_code == 10 and second.exit_code == 0, second.output
    vote, decided = _payload(url, run_id, "gate_vote"), _payload(url, run_id, "gate_decided")
    assert vote["signature"]["by"] == "alice" and decided["signature"]["by"] == "bob"
    signed = decided["signature"]
    # what bob signed: the gate, its run, the chain head he decided at, the decision,
    # the value the hook made of his answer, and the answer itself
    assert (signed["gate_id"], signed["run_id"], signed["approved"]) == (gate, run_id, True)
    assert signed["reason"] == "checked" and signed["answer"] == "MIT"
    assert signed["value"] == {"name": "b", "spdx": "MIT", "source": "human"} == decided["value"]
    assert sql(url, "SELECT 1 FROM audit_events WHERE hash = :h", h=signed["head"]) == [(1,)]
    assert cli("verify", run_id, "--db", url).exit_code == 0


def test_signing_with_a_key_that_is_not_the_deciders_is_refused_with_nothing_written(
    url: str, tmp_path: Path, keys: dict[str, tuple[Path, Path]]
) -> None:
    gate = run_gated(url, tmp_path)
    _register(url, keys)
    assert cli("user", "add", "carol", "--db", url).exit_code == 0
    before = snapshot(url)

    with_bobs = cli("approve", gate, "--by", "alice", "--sign-with", str(keys["bob"][0]),
                    "--db", url)  # fmt: skip
    keyless = cli("approve", gate, "--by", "carol", "--sign-with", str(keys["bob"][0]),
                  "--db", url)  # fmt: skip

    assert with_bobs.exit_code == 2 and "is not alice's registered key" in with_bobs.stderr
    assert keyless.exit_code == 2 and "carol has no registered public key" in keyless.stderr
    assert snapshot(url) == before


def _signed_gate(
    url: str, tmp_path: Path, keys: dict[str, tuple[Path, Path]], monkeypatch: pytest.MonkeyPatch,
    key: str | None,
) -> tuple[str, str]:  # fmt: skip
    """A gate alice approved with a signed decision (in a store keyed with ``key``)."""
    if key is None:
        monkeypatch.delenv(KEY_ENV, raising=False)
    else:
        monkeypatch.setenv(KEY_ENV, key)
    gate = run_gated(url, tmp_path)
    _register(url, keys)
    res = cli("approve", gate, "--by", "alice", "--reason", "MIT, says the header",
              "--sign-with", str(keys["alice"][0]), "--db", url)  # fmt: skip
    assert res.exit_code == 0, res.output
    run_id = gate.rsplit("-g", 1)[0]
    assert cli("verify", run_id, "--db", url).exit_code == 0
    return gate, run_id


def _verify_of_forged(
    url: str, tmp_path: Path, keys: dict[str, tuple[Path, Path]],
    monkeypatch: pytest.MonkeyPatch, key: str | None,
    forge: Callable[[str, dict[str, Any]], None],
) -> tuple[str, str]:  # fmt: skip
    """A decision signed by alice, its chained payload changed by ``forge(gate, payload)``
    and the chain recomputed with the store's own hash (``key``): (gate, why verify fails)."""
    gate, run_id = _signed_gate(url, tmp_path, keys, monkeypatch, key)
    decided = _payload(url, run_id, "gate_decided")
    forge(gate, decided)
    _set_payload(url, run_id, "gate_decided", decided)
    rechain(url, run_id, key)
    return gate, _failure(url, run_id)


@pytest.fixture(params=[None, KEY], ids=["plain", "keyed"])
def chain_key(request: pytest.FixtureRequest) -> str | None:
    """The store's chain: plain, or keyed (HMAC)."""
    key: str | None = request.param
    return key


def test_an_edited_signed_decision_fails_verify_naming_the_gate(
    url: str, tmp_path: Path, keys: dict[str, tuple[Path, Path]],
    monkeypatch: pytest.MonkeyPatch, chain_key: str | None,
) -> None:  # fmt: skip
    def edit(gate: str, decided: dict[str, Any]) -> None:
        # the gate row and the chained event edited alike: everything but the signature fits
        decided["reason"] = "approved without looking"
        sql(url, "UPDATE gates SET reason = :r WHERE gate_id = :g", r=decided["reason"], g=gate)

    gate, why = _verify_of_forged(url, tmp_path, keys, monkeypatch, chain_key, edit)
    assert why == f"gate {gate}: the recorded decision differs from what alice signed (reason)"


def test_a_decision_signed_with_another_persons_key_fails_verify_naming_the_gate(
    url: str, tmp_path: Path, keys: dict[str, tuple[Path, Path]],
    monkeypatch: pytest.MonkeyPatch, chain_key: str | None,
) -> None:  # fmt: skip
    def resign(gate: str, decided: dict[str, Any]) -> None:
        # bob (or whoever holds another key) signs "alice approved" himself
        statement = {k: v for k, v in decided["signature"].items() if k not in ("key_id", "sig")}
        decided["signature"] = load_signer(keys["bob"][0]).sign(statement)

    gate, why = _verify_of_forged(url, tmp_path, keys, monkeypatch, chain_key, resign)
    assert why.startswith(f"gate {gate}: the decision signed by alice fails with alice's key")
    assert "signed by key" in why


def test_a_cli_signed_decision_is_uploaded_through_the_api_and_verifies(
    url: str, tmp_path: Path, keys: dict[str, tuple[Path, Path]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.delenv("CONVERGE_TOKEN", raising=False)
    gate = run_gated(url, tmp_path, extra=HOOK)
    run_id = gate.rsplit("-g", 1)[0]
    _register(url, keys)
    store = open_store(url)
    try:
        alice = add_token(store, "alice")
        app = create_app(store)
        with served(store, app) as base:
            # a statement alice's token asked for, signed with bob's key: refused
            auth = {"Authorization": f"Bearer {alice}"}
            asked = httpx.post(f"{base}/api/gates/{gate}/statement",
                               json={"approved": True, "value": "MIT"}, headers=auth)  # fmt: skip
            forged = load_signer(keys["bob"][0]).sign(asked.json()["statement"])
            before = snapshot(url)
            refused = httpx.post(f"{base}/api/gates/{gate}/signed-decision",
                                 json={"statement": forged}, headers=auth)  # fmt: skip
            assert refused.status_code == 403, refused.text
            assert "fails with alice's key" in refused.json()["detail"]
            assert snapshot(url) == before

            # the CLI: the statement from the server, signed here, uploaded
            res = cli("approve", gate, "--by", "alice", "--value", "MIT", "--server", base,
                      "--token", alice, "--sign-with", str(keys["alice"][0]))  # fmt: skip
            assert res.exit_code == 0, res.output
        assert store.get_gate(gate).decided_by == "alice"
        signed = _payload(url, run_id, "gate_decided")["signature"]
        assert signed["by"] == "alice" and signed["value"]["spdx"] == "MIT"
        assert store.verify(run_id).ok
    finally:
        store.close()


def test_a_registered_key_swapped_in_the_database_fails_verify_naming_the_gate(
    url: str, tmp_path: Path, keys: dict[str, tuple[Path, Path]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    gate, run_id = _signed_gate(url, tmp_path, keys, monkeypatch, None)
    bobs = keys["bob"][1].read_text()
    kid = sql(url, "SELECT key_id FROM people WHERE name = 'bob'")[0][0]

    sql(url, "UPDATE people SET public_key = :k, key_id = :i WHERE name = 'alice'", k=bobs, i=kid)

    why = _failure(url, run_id)
    assert why.startswith(f"gate {gate}: the decision signed by alice fails with alice's key")


def test_the_proof_bundle_carries_the_signed_decisions_and_their_keys(
    url: str, tmp_path: Path, keys: dict[str, tuple[Path, Path]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    gate, run_id = _signed_gate(url, tmp_path, keys, monkeypatch, None)
    operator, operator_pub = generate_keys(tmp_path / "operator")
    proof = tmp_path / "run.proof.json"
    exported = cli("export", run_id, "--proof", str(proof), "--signing-key", str(operator),
                   "--db", url)  # fmt: skip
    assert exported.exit_code == 0, exported.output
    bundle = json.loads(proof.read_text())

    checked = cli("verify-bundle", str(proof), "--public-key", str(operator_pub), "--json")
    independent = verify_independent(proof, Keys(operator, operator_pub))
    bundle["deciders"]["alice"] = keys["bob"][1].read_text()  # another key, said to be alice's
    proof.write_text(json.dumps(bundle))
    forged = cli("verify-bundle", str(proof), "--public-key", str(operator_pub), "--json")
    independent_forged = verify_independent(proof, Keys(operator, operator_pub))

    # the independent verifier (examples/verify_bundle.py) agrees on both
    assert independent[0] == 0 and ("signed decisions", True) in independent[1]
    assert independent_forged[0] == 1 and ("signed decisions", False) in independent_forged[1]

    assert bundle["deciders"].keys() == {"alice"}
    assert checked.exit_code == 0, checked.output
    [ok] = [c for c in json.loads(checked.stdout)["checks"] if c["name"] == "signed decisions"]
    assert ok["ok"] and ok["detail"].startswith("1 signed decision(s) verify")
    [bad] = [c for c in json.loads(forged.stdout)["checks"] if c["name"] == "signed decisions"]
    assert forged.exit_code == 1 and not bad["ok"]
    assert bad["detail"].startswith(f"gate {gate}: the decision signed by alice fails")
