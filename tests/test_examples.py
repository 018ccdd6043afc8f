"""The dependency audit and oscillator examples, on fixed synthetic distributions.

No test here depends on what the virtualenv holds: the audit's inventory reads a
list of :class:`Distribution` values given by the test.
"""

from __future__ import annotations

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
PIP = Distribution("pip", "24.0", license_expression="MIT")
DEVTOOL = Distribution("devtool", "1.0", license_expression="GPL-3.0-only")
WINONLY = Distribution("winonly", "1.0", license_expression="AGPL-3.0-only")
MYSTERY = Distribution("mystery", "0.1", license="Proprietary-ish, ask legal")
ENIGMA = Distribution("enigma", "0.2", classifiers=("License :: Other/Proprietary License",))

KNOWN = [APP, LIB_A, LIB_B, LIB_C, LIB_D, LIB_E, DEVTOOL, WINONLY]
POLICY = {"policy": [{"root": "app", "forbidden": ["AGPL-3.0-only"]}]}
# the whole environment; nothing installed here is forbidden
EVERYTHING = {"policy": [{"root": None, "forbidden": ["SSPL-1.0"]}]}


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


def test_licenses_record_the_version_the_spdx_id_and_where_it_came_from() -> None:
    result = audit(KNOWN).run(POLICY)
    found = {c["name"]: (c["version"], c["spdx"], c["source"]) for c in contents(result, "license")}
    assert found["app"] == ("1.0", "MIT", "license-expression")
    assert found["lib-a"] == ("1.0", "Apache-2.0", "license")
    assert found["lib-b"] == ("2.0", "BSD-3-Clause", "classifier")
    assert found["lib-d"] == ("4.0", "MIT", "license")
    assert set(found) == {"app", "lib-a", "lib-b", "lib-c", "lib-d"}  # app's closure
    assert result.stop_reason == CriteriaMet(criteria=["all_classified", "risks_assessed"])


def test_dependencies_skip_extras_only_and_false_markers_and_follow_requested_extras() -> None:
    result = audit(KNOWN).run(POLICY)
    edges = {(c["from"], c["to"]) for c in contents(result, "dependency")}
    # lib_b[extra1] pulls lib-d in for app; devtool (extra dev), winonly (marker) and
    # lib-e (an extra nobody asked for) are not dependencies
    assert edges == {("app", "lib-a"), ("app", "lib-b"), ("app", "lib-d"), ("lib-a", "lib-c")}


def test_the_scope_is_the_roots_closure_with_the_extras_asked_for_or_everything() -> None:
    def scope(policy: dict[str, Any]) -> list[str]:
        result = audit([*KNOWN, PIP], gated=False).run({"policy": [policy]})
        return [c["name"] for c in contents(result, "package")]

    assert scope({"root": "app"}) == ["app", "lib-a", "lib-b", "lib-c", "lib-d"]
    assert scope({"root": "app", "extras": ["dev"]}) == [
        "app",
        "devtool",
        "lib-a",
        "lib-b",
        "lib-c",
        "lib-d",
    ]
    everything = [d.name for d in sorted(KNOWN, key=lambda d: d.name.lower())]
    assert scope({"root": None, "forbidden": ["SSPL-1.0"]}) == sorted(
        n.replace("_", "-").lower() for n in everything
    )
    assert "pip" in scope({"root": None, "forbidden": ["SSPL-1.0"], "tools": True})


def test_copyleft_findings_name_the_path_from_the_root_and_tell_strong_from_weak() -> None:
    result = audit(KNOWN).run({"policy": [{"root": "app", "extras": ["dev"]}]})
    risks = {c["name"]: c for c in contents(result, "risk.copyleft")}
    assert set(risks) == {"lib-c", "devtool"}
    assert risks["lib-c"]["path"] == ["app", "lib-a", "lib-c"]
    assert (risks["lib-c"]["spdx"], risks["lib-c"]["copyleft"]) == ("LGPL-3.0-or-later", "weak")
    assert (risks["devtool"]["path"], risks["devtool"]["copyleft"]) == (
        ["app", "devtool"],
        "strong",
    )
    fact = next(f for f in result.context.get("risk.copyleft") if f.content["name"] == "lib-c")
    parents = [result.context.fact(p) for p in fact.provenance.parents]
    assert [p.key for p in parents if p] == ["license", "dependency", "dependency"]


def test_every_policy_violation_is_found_in_one_run_with_its_path() -> None:
    policy = {"policy": [{"root": "app", "forbidden": ["LGPL-3.0-or-later", "MIT"]}]}
    result = audit(KNOWN).run(policy)
    reason = result.stop_reason
    assert isinstance(reason, InvariantViolated)
    assert reason.invariant_class is InvariantClass.ACCEPTANCE
    assert reason.name == "no_forbidden_license"
    assert reason.exit_code == 4
    assert "3 license policy violation(s)" in reason.reason
    assert "lib-c (LGPL-3.0-or-later, forbidden): app -> lib-a -> lib-c" in reason.reason
    found = {c["name"]: c for c in contents(result, "policy.violation")}
    assert set(found) == {"app", "lib-c", "lib-d"}
    assert found["lib-d"]["path"] == ["app", "lib-d"]  # app asked for lib_b[extra1]
    assert found["lib-d"]["rule"] == "forbidden"


def test_an_allow_list_makes_every_other_license_a_finding() -> None:
    policy = {"policy": [{"root": "app", "allowed": ["MIT", "Apache-2.0", "BSD-3-Clause"]}]}
    result = audit(KNOWN).run(policy)
    assert isinstance(result.stop_reason, InvariantViolated)
    found = contents(result, "policy.violation")
    assert [(c["name"], c["rule"], c["spdx"]) for c in found] == [
        ("lib-c", "not allowed", "LGPL-3.0-or-later")
    ]


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
    assert "lib-c (LGPL-3.0-or-later, forbidden): lib-a -> lib-c" in reason.reason
    assert "lib-a (MIT" not in reason.reason  # lib-a is Apache-2.0


def test_an_unknown_license_pauses_at_a_gate_and_approval_counts_as_reviewed() -> None:
    engine = audit([*KNOWN, MYSTERY])
    paused = engine.run(EVERYTHING)
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
    first = engine.run(EVERYTHING).stop_reason
    assert isinstance(first, HitlGatePending)
    second = engine.resume(first.gate_id, GateDecision.reject(by="bob", reason="MIT License"))
    assert isinstance(second.stop_reason, HitlGatePending)  # the next unknown, mystery
    done = engine.resume(second.stop_reason.gate_id, GateDecision.approve(by="alice"))
    assert done.stop_reason.is_success(), done.stop_reason
    human = [c for c in contents(done, "license") if c["source"] == "human"]
    assert human == [{"name": "enigma", "version": "0.2", "spdx": "MIT", "source": "human"}]
    assert [c["name"] for c in contents(done, "license.unknown")] == ["mystery"]
    # the copyleft assessment saw the human's license too
    assert contents(done, "risk.assessed")[-1]["licenses"] == len(KNOWN) + 1


def test_a_rejection_without_a_license_leaves_the_package_unclassified() -> None:
    engine = audit([*KNOWN, MYSTERY])
    paused = engine.run(EVERYTHING).stop_reason
    assert isinstance(paused, HitlGatePending)
    done = engine.resume(paused.gate_id, GateDecision.reject(by="bob", reason="no idea"))
    assert done.stop_reason == CriteriaUnmet(criteria=["all_classified"])
    report = next(c for c in done.criteria if c.id == "all_classified")
    assert report.reason is not None and "mystery: rejected by bob" in report.reason


def test_without_a_gate_the_strict_criterion_waits_for_a_human() -> None:
    engine = audit([*KNOWN, MYSTERY], gated=False, criteria=[all_classified_strict])
    reason = engine.run(EVERYTHING).stop_reason
    assert isinstance(reason, HumanInterventionRequired)
    assert reason.approval_refs == ["license.unknown:mystery"]


def test_the_audit_is_deterministic() -> None:
    first = audit([*KNOWN, MYSTERY], gated=False).run(EVERYTHING)
    second = audit([*KNOWN, MYSTERY], gated=False).run(EVERYTHING)
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
