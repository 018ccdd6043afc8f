"""The dependency audit and oscillator examples, on fixed synthetic distributions.

No test here depends on what the virtualenv holds: the audit's inventory reads a
list of :class:`Distribution` values given by the test.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

from criteria import Criterion
from engine import (
    Budget,
    CriteriaMet,
    CriteriaUnmet,
    CycleBudgetExhausted,
    Engine,
    GateDecision,
    HitlGatePending,
    HumanInterventionRequired,
    InvariantClass,
    InvariantViolated,
    RunResult,
)
from examples.dependency_audit import (
    Distribution,
    all_classified,
    all_classified_strict,
    audit_suggestors,
    classify,
    from_human,
    is_copyleft,
    no_forbidden_license,
    risks_assessed,
)
from examples.oscillator import ping, pong
from gates.hitl import require_approval

MIT_TEXT = """Copyright (c) 2024 Example Authors

Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction..."""

APP = Distribution(
    "App",
    "1.0",
    license_expression="MIT",
    requires=(
        "lib-a>=1",
        "lib_b[extra1]",
        "devtool; extra == 'dev'",
        "winonly; sys_platform == 'no-such-platform'",
    ),
)
LIB_A = Distribution("lib-a", "1.0", license="Apache Software License", requires=("lib-c",))
LIB_B = Distribution(
    "lib_b",
    "2.0",
    classifiers=("License :: OSI Approved :: BSD License",),
    requires=("lib-d; extra == 'extra1'", "lib-e; extra == 'other'"),
)
LIB_C = Distribution("lib-c", "3.0", license_expression="LGPL-3.0-or-later")
LIB_D = Distribution("lib-d", "4.0", license=MIT_TEXT)
LIB_E = Distribution("lib-e", "1.0", license_expression="GPL-3.0-only")
DEVTOOL = Distribution("devtool", "1.0", license_expression="GPL-3.0-only")
WINONLY = Distribution("winonly", "1.0", license_expression="AGPL-3.0-only")
MYSTERY = Distribution("mystery", "0.1", license="Proprietary-ish, ask legal")
ENIGMA = Distribution("enigma", "0.2", classifiers=("License :: Other/Proprietary License",))

KNOWN = [APP, LIB_A, LIB_B, LIB_C, LIB_D, LIB_E, DEVTOOL, WINONLY]
POLICY = {"policy": [{"root": "app", "forbidden": ["AGPL-3.0-only"]}]}


def audit(
    dists: list[Distribution],
    *,
    gated: bool = True,
    criteria: list[Criterion] | None = None,
) -> Engine:
    gates = [require_approval(keys=["license.unknown"])] if gated else []
    engine = Engine(
        budget=Budget(max_cycles=20),
        criteria=criteria if criteria is not None else [all_classified, risks_assessed],
        invariants=[no_forbidden_license],
        gates=gates,
    )
    engine.register(*audit_suggestors(lambda: dists))
    return engine


def contents(result: RunResult, key: str) -> list[Any]:
    return [f.content for f in result.context.get(key)]


# --- SPDX normalisation --------------------------------------------------------------
@pytest.mark.parametrize(
    ("expression", "text", "classifiers", "expected"),
    [
        ("MIT", "GPL", ["License :: OSI Approved :: GNU General Public License (GPL)"], "MIT"),
        ("apache-2.0 or mit", None, [], "Apache-2.0 OR MIT"),
        ("MPL-2.0 AND (Apache-2.0 OR MIT)", None, [], "MPL-2.0 AND (Apache-2.0 OR MIT)"),
    ],
)
def test_license_expression_wins_and_is_canonicalised(
    expression: str, text: str | None, classifiers: list[str], expected: str
) -> None:
    assert classify(expression, text, classifiers) == (expected, "license-expression")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("MIT License", "MIT"),
        ("The MIT License (MIT)", "MIT"),
        ("BSD", "BSD-3-Clause"),
        ("New BSD License", "BSD-3-Clause"),
        ("Simplified BSD", "BSD-2-Clause"),
        ("Apache 2.0", "Apache-2.0"),
        ("Apache Software License", "Apache-2.0"),
        ("Apache License, Version 2.0", "Apache-2.0"),
        ("GPLv3+", "GPL-3.0-or-later"),
        ("LGPL-2.1+", "LGPL-2.1-or-later"),
        ("MIT OR Apache-2.0", "MIT OR Apache-2.0"),
        ("MIT/Apache 2.0", "MIT OR Apache-2.0"),
        ("ISC License", "ISC"),
        ("MPL 2.0", "MPL-2.0"),
        (MIT_TEXT, "MIT"),
        (
            "BSD 3-Clause License\n\nCopyright (c) 2020, Someone\nAll rights reserved.",
            "BSD-3-Clause",
        ),
        ("Copyright 2020\n\nRedistribution and use in source and binary forms...", "BSD-2-Clause"),
    ],
)
def test_free_text_license_fields_map_to_spdx_ids(text: str, expected: str) -> None:
    assert classify(None, text, []) == (expected, "license")


@pytest.mark.parametrize(
    ("text", "classifiers", "expected"),
    [
        (None, ["License :: OSI Approved :: MIT License"], "MIT"),
        ("UNKNOWN", ["License :: OSI Approved :: Apache Software License"], "Apache-2.0"),
        (None, ["License :: OSI Approved :: Mozilla Public License 2.0 (MPL 2.0)"], "MPL-2.0"),
        (
            None,
            ["License :: OSI Approved :: MIT License", "License :: OSI Approved :: BSD License"],
            "MIT AND BSD-3-Clause",
        ),
        (
            None,
            ["License :: DFSG approved", "License :: OSI Approved :: ISC License (ISCL)"],
            "ISC",
        ),
    ],
)
def test_classifiers_are_used_when_the_fields_say_nothing(
    text: str | None, classifiers: list[str], expected: str
) -> None:
    assert classify(None, text, classifiers) == (expected, "classifier")


@pytest.mark.parametrize(
    ("text", "classifiers"),
    [
        ("Proprietary-ish, ask legal", []),
        (None, ["License :: Other/Proprietary License"]),
        (None, ["License :: OSI Approved"]),
        (None, []),
    ],
)
def test_unclassifiable_metadata_is_unknown(text: str | None, classifiers: list[str]) -> None:
    assert classify(None, text, classifiers) is None


def test_a_reviewer_reason_is_a_license_only_when_it_names_one() -> None:
    assert from_human("MIT") == "MIT"
    assert from_human("mit license") == "MIT"
    assert from_human("BSD-2-Clause OR Apache-2.0") == "BSD-2-Clause OR Apache-2.0"
    assert from_human("LicenseRef-Acme-EULA") == "LicenseRef-Acme-EULA"
    assert from_human("no idea, ask legal") is None
    assert from_human(None) is None


def test_copyleft_is_judged_on_what_cannot_be_avoided() -> None:
    assert is_copyleft("LGPL-3.0-only")
    assert is_copyleft("MPL-2.0 AND (Apache-2.0 OR MIT)")
    assert not is_copyleft("MIT OR GPL-3.0-only")
    assert not is_copyleft("Apache-2.0 WITH LLVM-exception")


# --- the audit run -------------------------------------------------------------------
def test_the_inventory_is_one_fact_per_distribution_sorted_by_normalised_name() -> None:
    result = audit([LIB_B, APP, LIB_A, Distribution("LIB.A", "9")], gated=False).run(POLICY)
    names = [c["name"] for c in contents(result, "package")]
    assert names == ["app", "lib-a", "lib-b"]
    assert contents(result, "package")[1]["version"] == "1.0"  # the first one found wins


def test_licenses_record_the_spdx_id_and_where_it_came_from() -> None:
    result = audit(KNOWN).run(POLICY)
    found = {c["name"]: (c["spdx"], c["source"]) for c in contents(result, "license")}
    assert found["app"] == ("MIT", "license-expression")
    assert found["lib-a"] == ("Apache-2.0", "license")
    assert found["lib-b"] == ("BSD-3-Clause", "classifier")
    assert found["lib-d"] == ("MIT", "license")
    assert len(found) == len(KNOWN)
    assert result.stop_reason == CriteriaMet(criteria=["all_classified", "risks_assessed"])


def test_dependencies_skip_extras_only_and_false_markers_and_follow_requested_extras() -> None:
    result = audit(KNOWN).run(POLICY)
    edges = {(c["from"], c["to"]) for c in contents(result, "dependency")}
    # lib_b[extra1] pulls lib-d in for app; devtool (extra dev), winonly (marker) and
    # lib-e (an extra nobody asked for) are not dependencies
    assert edges == {("app", "lib-a"), ("app", "lib-b"), ("app", "lib-d"), ("lib-a", "lib-c")}


def test_dependencies_without_packaging_still_skip_extras_only_requirements(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "packaging.requirements", None)  # import fails
    result = audit(KNOWN).run(POLICY)
    edges = {(c["from"], c["to"]) for c in contents(result, "dependency")}
    # the simple rule takes the platform marker as true, and still skips extras
    assert edges == {
        ("app", "lib-a"),
        ("app", "lib-b"),
        ("app", "winonly"),
        ("app", "lib-d"),
        ("lib-a", "lib-c"),
    }


def test_copyleft_risk_names_the_transitive_path() -> None:
    result = audit(KNOWN).run(POLICY)
    risks = {c["name"]: c for c in contents(result, "risk.copyleft")}
    assert set(risks) == {"app", "lib-a"}  # lib-c's own license is not a risk of lib-c
    assert risks["app"]["path"] == ["app", "lib-a", "lib-c"]
    assert risks["app"]["spdx"] == "LGPL-3.0-or-later"
    assert risks["lib-a"]["path"] == ["lib-a", "lib-c"]
    fact = result.context.get("risk.copyleft")[0]
    parents = [result.context.fact(p) for p in fact.provenance.parents]
    assert [p.key for p in parents if p] == ["license", "dependency", "dependency"]


def test_a_forbidden_license_in_the_closure_violates_the_invariant() -> None:
    policy = {"policy": [{"root": "app", "forbidden": ["LGPL-3.0-or-later"]}]}
    result = audit(KNOWN).run(policy)
    reason = result.stop_reason
    assert isinstance(reason, InvariantViolated)
    assert reason.invariant_class is InvariantClass.SEMANTIC
    assert reason.name == "no_forbidden_license"
    assert "lib-c is licensed LGPL-3.0-or-later" in reason.reason
    assert "app -> lib-a -> lib-c" in reason.reason
    assert reason.exit_code == 4


def test_a_forbidden_license_outside_the_closure_is_allowed() -> None:
    # winonly (AGPL) and lib-e (GPL) are installed but not in app's closure
    policy = {"policy": [{"root": "app", "forbidden": ["AGPL-3.0-only", "GPL-3.0-only"]}]}
    assert audit(KNOWN).run(policy).stop_reason.is_success()


def test_the_forbidden_licenses_can_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CONVERGE_AUDIT_ROOT", "lib-a")
    monkeypatch.setenv("CONVERGE_AUDIT_FORBIDDEN", "MIT, LGPL-3.0-or-later")
    reason = audit(KNOWN).run().stop_reason
    assert isinstance(reason, InvariantViolated)
    assert "closure of lib-a (lib-a -> lib-c)" in reason.reason


def test_an_unknown_license_pauses_at_a_gate_and_approval_counts_as_reviewed() -> None:
    engine = audit([*KNOWN, MYSTERY])
    paused = engine.run(POLICY)
    assert isinstance(paused.stop_reason, HitlGatePending)
    assert paused.stop_reason.summary.startswith("Approve license.unknown from licenses")
    assert paused.stop_reason.exit_code == 10
    done = engine.resume(paused.stop_reason.gate_id, GateDecision.approve(by="alice"))
    assert done.stop_reason == CriteriaMet(criteria=["all_classified", "risks_assessed"])
    unknown = contents(done, "license.unknown")
    assert unknown == [
        {"name": "mystery", "version": "0.1", "raw": "License: Proprietary-ish, ask legal"}
    ]


def test_a_rejection_with_an_spdx_reason_is_a_human_classification() -> None:
    engine = audit([*KNOWN, ENIGMA, MYSTERY])
    first = engine.run(POLICY).stop_reason
    assert isinstance(first, HitlGatePending)
    second = engine.resume(first.gate_id, GateDecision.reject(by="bob", reason="MIT License"))
    assert isinstance(second.stop_reason, HitlGatePending)  # the next unknown, mystery
    done = engine.resume(second.stop_reason.gate_id, GateDecision.approve(by="alice"))
    assert done.stop_reason.is_success(), done.stop_reason
    human = [c for c in contents(done, "license") if c["source"] == "human"]
    assert human == [{"name": "enigma", "spdx": "MIT", "source": "human"}]
    assert [c["name"] for c in contents(done, "license.unknown")] == ["mystery"]
    # the copyleft assessment saw the human's license too
    assert contents(done, "risk.assessed")[-1]["licenses"] == len(KNOWN) + 1


def test_a_rejection_without_a_license_leaves_the_package_unclassified() -> None:
    engine = audit([*KNOWN, MYSTERY])
    paused = engine.run(POLICY).stop_reason
    assert isinstance(paused, HitlGatePending)
    done = engine.resume(paused.gate_id, GateDecision.reject(by="bob", reason="no idea"))
    assert done.stop_reason == CriteriaUnmet(criteria=["all_classified"])
    report = next(c for c in done.criteria if c.id == "all_classified")
    assert report.reason is not None and "mystery: rejected by bob" in report.reason


def test_without_a_gate_the_strict_criterion_waits_for_a_human() -> None:
    engine = audit([*KNOWN, MYSTERY], gated=False, criteria=[all_classified_strict])
    reason = engine.run(POLICY).stop_reason
    assert isinstance(reason, HumanInterventionRequired)
    assert reason.approval_refs == ["license.unknown:mystery"]


def test_the_audit_is_deterministic() -> None:
    first = audit([*KNOWN, MYSTERY], gated=False).run(POLICY)
    second = audit([*KNOWN, MYSTERY], gated=False).run(POLICY)
    assert first.facts_root == second.facts_root
    assert [f.id for f in first.context] == [f.id for f in second.context]


# --- the oscillator --------------------------------------------------------------------
def test_the_oscillator_never_reaches_a_fixed_point() -> None:
    engine = Engine(budget=Budget(max_cycles=10))
    engine.register(ping, pong)
    result = engine.run({"ping": [0]})
    assert result.stop_reason == CycleBudgetExhausted(cycles_executed=10, limit=10)
    assert contents(result, "ping") == [0, 2, 4, 6, 8, 10]
    assert contents(result, "pong") == [1, 3, 5, 7, 9]
