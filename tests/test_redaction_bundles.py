"""The offline verifiers check redactions (issue 56): a ``converge.bundle/3`` of a
redacted run verifies with ``converge verify-bundle``, examples/verify_bundle.py
and go_audit; a bundle whose redactions disagree with its chained
``fact_redacted`` events — a marker edited, a fact blanked by hand, a content put
back — fails each of them, every other check passing (the chain hashes such a
fact by its commitment alone, so only the redactions check can tell)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from audit import open_store
from audit.redaction import redact_fact
from audit.settings import CHAIN_FORMAT, set_setting
from examples.verify_formats import commitment
from tests.hitlfixtures import store_url_for
from tests.proofsfixtures import Keys, cli, failed, make_keys, verify_cli, verify_independent
from tests.test_go_sumdb import _go, go_audit  # noqa: F401 (the fixture)
from tests.test_redaction import INITIAL, SECRET, _engine, _fact_id

Bundle = dict[str, Any]


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _export(url: str, run_id: str, keys: Keys, out: Path) -> Bundle:
    res = cli(
        "export", run_id, "--proof", str(out), "--signing-key", str(keys.key), "--db", url
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    bundle: Bundle = json.loads(out.read_text("utf-8"))
    return bundle


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Bundle, Bundle, Keys]]:
    """(the bundle before, the bundle after) the e-mail (a promoted fact) and the
    contact (an initial fact) are redacted, and the log's keys."""
    tmp = tmp_path_factory.mktemp("redb")
    keys = make_keys(tmp / "keys")
    with store_url_for("sqlite", tmp) as url:
        s = open_store(url)
        try:
            set_setting(s, CHAIN_FORMAT, "2")
            run_id = _engine(s).run(INITIAL).run_id
            before = _export(url, run_id, keys, tmp / "before.json")
            for key in ("email", "contact"):
                redact_fact(s, run_id, _fact_id(s, run_id, key), by="ada", reason="GDPR art. 17")
            after = _export(url, run_id, keys, tmp / "after.json")
        finally:
            s.close()
    yield before, after, keys


def _promoted(bundle: Bundle, key: str) -> int:
    """The index in ``events`` of the fact_promoted event of the fact ``key``."""
    for i, e in enumerate(bundle["events"]):
        if e["kind"] == "fact_promoted" and json.loads(e["payload"])["key"] == key:
            return i
    raise AssertionError(f"no fact {key}")


def _edit_payload(bundle: Bundle, i: int, edit: Callable[[Bundle], None]) -> None:
    payload = json.loads(bundle["events"][i]["payload"])
    edit(payload)
    bundle["events"][i]["payload"] = _canonical(payload)


def _marker_edited(before: Bundle, after: Bundle) -> None:
    def edit(fact: Bundle) -> None:
        fact["content"]["redacted"]["reason"] = "asked nicely"

    _edit_payload(after, _promoted(after, "email"), edit)


def _initial_marker_edited(before: Bundle, after: Bundle) -> None:
    def edit(started: Bundle) -> None:
        for fact in started["initial_facts"]:
            if fact["key"] == "contact":
                fact["content"]["redacted"]["by"] = "mallory"

    started = next(i for i, e in enumerate(after["events"]) if e["kind"] == "run_started")
    _edit_payload(after, started, edit)
    texts = [json.loads(t) for t in after["initial_facts"]]
    for fact in texts:  # the facts the bundle carries again, so that "facts" passes
        if fact["key"] == "contact":
            fact["content"]["redacted"]["by"] = "mallory"
    after["initial_facts"] = [_canonical(f) for f in texts]


def _blanked_by_hand(before: Bundle, after: Bundle) -> None:
    marker = json.loads(after["events"][_promoted(after, "email")]["payload"])["content"]
    i = _promoted(after, "answer")
    text = after["events"][i]["payload"]

    def edit(fact: Bundle) -> None:
        fact.pop("salt")
        fact["content"], fact["commitment"] = marker, commitment(text)

    _edit_payload(after, i, edit)


def _content_put_back(before: Bundle, after: Bundle) -> None:
    i = _promoted(after, "email")
    after["events"][i]["payload"] = before["events"][i]["payload"]
    assert SECRET in after["events"][i]["payload"]


TAMPERS = {
    "marker edited": (_marker_edited, "redaction marker differs from its fact_redacted"),
    "initial marker edited": (
        _initial_marker_edited,
        "redaction marker differs from its fact_redacted",
    ),
    "blanked by hand": (_blanked_by_hand, "is redacted without a fact_redacted event"),
    "content put back": (_content_put_back, "which the run does not hold redacted"),
}


def test_the_bundle_of_a_redacted_run_verifies_and_says_so(
    bundles: tuple[Bundle, Bundle, Keys], tmp_path: Path
) -> None:
    _, after, keys = bundles
    path = tmp_path / "after.json"
    path.write_text(json.dumps(after), "utf-8")
    code, result = verify_cli(path, keys)
    assert code == 0, result
    (check,) = [c for c in result["checks"] if c["name"] == "redactions"]
    assert check["detail"] == "2 redacted facts, each its fact_redacted event's"
    other_code, other = verify_independent(path, keys)
    assert other_code == 0 and ("redactions", True) in other


@pytest.mark.parametrize("tamper", sorted(TAMPERS))
def test_a_redaction_that_disagrees_with_the_chain_fails_both_python_verifiers(
    bundles: tuple[Bundle, Bundle, Keys], tmp_path: Path, tamper: str
) -> None:
    before, after, keys = bundles
    edit, why = TAMPERS[tamper]
    bundle = json.loads(json.dumps(after))
    edit(before, bundle)
    path = tmp_path / "tampered.json"
    path.write_text(json.dumps(bundle), "utf-8")
    code, result = verify_cli(path, keys)
    problems = failed(result)
    assert code == 1 and list(problems) == ["redactions"], problems
    assert why in problems["redactions"]
    other_code, other = verify_independent(path, keys)
    assert other_code == 1 and [n for n, ok in other if not ok] == ["redactions"], other


@pytest.mark.parametrize("tamper", sorted(TAMPERS))
def test_the_stdlib_verifier_says_why_in_the_store_verifys_words(
    bundles: tuple[Bundle, Bundle, Keys], tamper: str
) -> None:
    from examples.verify_bundle import checks

    before, after, keys = bundles
    edit, why = TAMPERS[tamper]
    bundle = json.loads(json.dumps(after))
    edit(before, bundle)
    reasons: dict[str, str] = {}
    results = checks(bundle, keys.pub.read_bytes(), None, reasons)
    assert [n for n, ok in results if not ok] == ["redactions"]
    assert why in reasons["redactions"] and reasons["redactions"].startswith("event seq ")


def test_go_audit_ties_redactions_alike(
    bundles: tuple[Bundle, Bundle, Keys],
    tmp_path: Path,
    go_audit: Path,  # noqa: F811 (the fixture imported)
) -> None:
    before, after, _ = bundles
    path = tmp_path / "bundle.json"
    path.write_text(json.dumps(after), "utf-8")
    code, out = _go(go_audit, "redactions", path)
    assert code == 0 and "ok: 2 redacted facts" in out, out
    path.write_text(json.dumps(before), "utf-8")
    code, out = _go(go_audit, "redactions", path)
    assert code == 0 and "ok: 0 redacted facts" in out, out
    for tamper, (edit, why) in TAMPERS.items():
        bundle = json.loads(json.dumps(after))
        edit(before, bundle)
        path.write_text(json.dumps(bundle), "utf-8")
        code, out = _go(go_audit, "redactions", path)
        assert code == 1 and why in out and "FAILED: event seq " in out, (tamper, out)
