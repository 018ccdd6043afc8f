"""The dependency audit with an LLM license reviewer (examples/dependency_audit/
reviewer.py): a real MIT text is promoted without a gate, an ambiguous text asks
a human, the license fact's lineage reaches the file read; with no model the
audit runs as before. The reviewer's model is scripted with FunctionModel."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import RequestUsage
from typer.testing import CliRunner

from audit import SqlRunStore, open_store
from audit.queries import lineage_graph
from converge.cli import app
from converge.jobs import load_job
from engine import (
    Budget,
    Context,
    CriteriaMet,
    CriteriaUnmet,
    Engine,
    GateDecision,
    HitlGatePending,
    Proposal,
    RunResult,
)
from examples.dependency_audit import Distribution, spdx_value
from examples.dependency_audit.reviewer import (
    NOT_SPDX_GATE,
    REVIEWER,
    THRESHOLD,
    not_spdx,
    reviewed_audit,
    reviewer_agent,
)
from tests.replayjobs import reviewer_engine

ROOT = Path(__file__).resolve().parent.parent
VENDORED_MIT = ROOT / "examples" / "dependency_audit" / "vendor" / "legacy-left-pad"
APP = Distribution("app", "1.0", license_expression="Apache-2.0")


pytestmark = pytest.mark.usefixtures("no_model_requests")


def scripted_reviewer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Recognises the MIT permission notice; anything else is a low-confidence guess."""
    prompt = str(messages[0].parts[-1].content)  # type: ignore[union-attr]
    name = re.search(r'"name": "([^"]+)"', prompt)
    assert name is not None
    if "Permission is hereby granted, free of charge" in prompt and "MIT" in prompt:
        verdict: dict[str, Any] = {"name": name.group(1), "spdx": "MIT", "confidence": 0.95}
    else:
        verdict = {"name": name.group(1), "spdx": "NOASSERTION", "confidence": 0.3}
    return ModelResponse(
        parts=[ToolCallPart(info.output_tools[0].name, verdict)],
        usage=RequestUsage(input_tokens=len(prompt) // 4, output_tokens=20),
    )


def audit_engine(
    vendored_path: Path,
    *,
    with_reviewer: bool = True,
    model: Model | None = None,
    store: SqlRunStore | None = None,
) -> tuple[Engine, dict[str, Any]]:
    model = model or FunctionModel(scripted_reviewer)
    eng = reviewer_engine(store, model if with_reviewer else None)
    initial = {
        "policy": [{"root": "app", "forbidden": ["AGPL-3.0-only"]}],
        "vendored": [{"name": "legacy-left-pad", "version": "0.3.1", "path": str(vendored_path)}],
    }
    return eng, initial


def license_of(result: RunResult, name: str) -> Any:
    return next(f for f in result.context.get("license") if f.content["name"] == name)


def test_a_real_mit_text_is_promoted_by_the_reviewer_without_a_gate() -> None:
    eng, initial = audit_engine(VENDORED_MIT)
    result = eng.run(initial)
    assert result.stop_reason == CriteriaMet(criteria=["all_reviewed", "risks_assessed"])
    fact = license_of(result, "legacy-left-pad")
    assert fact.content == {
        "name": "legacy-left-pad",
        "spdx": "MIT",
        "confidence": 0.95,
        "source": "reviewer",
    }
    assert fact.confidence == 0.95 >= THRESHOLD
    assert fact.provenance.suggestor == REVIEWER
    assert result.usage.total_tokens > 0
    assert result.usage.cost_usd > 0


def test_the_lineage_of_the_reviewed_license_reaches_the_file_it_read() -> None:
    eng, initial = audit_engine(VENDORED_MIT)
    result = eng.run(initial)
    fact = license_of(result, "legacy-left-pad")
    graph = lineage_graph(result.context.facts(), fact.id)
    ancestors = [result.context.fact(i) for i in graph.nodes]
    files = [f for f in ancestors if f is not None and f.key == "license.file"]
    assert [Path(f.content["path"]) for f in files] == [VENDORED_MIT / "LICENSE"]
    data = (VENDORED_MIT / "LICENSE").read_bytes()
    assert files[0].content["sha256"] == hashlib.sha256(data).hexdigest()
    keys = {f.key for f in ancestors if f is not None}
    assert {"license.unknown", "package", "vendored"} <= keys


def ambiguous_component(tmp_path: Path) -> Path:
    folder = tmp_path / "legacy-left-pad"
    folder.mkdir()
    (folder / "COPYING").write_text(
        "You may use this code if you are nice to people and tell your friends.\n"
    )
    (folder / "pad.py").write_text("def pad(s): return s\n")
    return folder


def test_an_ambiguous_license_text_opens_the_gate_and_a_human_decides(tmp_path: Path) -> None:
    eng, initial = audit_engine(ambiguous_component(tmp_path))
    paused = eng.run(initial)
    reason = paused.stop_reason
    assert isinstance(reason, HitlGatePending)
    assert reason.agent_id == REVIEWER
    # NOASSERTION, the reviewer's "I don't know", waits for a human whatever its confidence
    assert "answered 'NOASSERTION' for legacy-left-pad, which is no known SPDX" in reason.summary
    done = eng.resume(reason.gate_id, GateDecision.approve(by="alice"))
    assert isinstance(done.stop_reason, CriteriaMet)
    assert license_of(done, "legacy-left-pad").content["spdx"] == "NOASSERTION"


def test_a_human_rejecting_a_review_with_an_spdx_reason_classifies_the_package(
    tmp_path: Path,
) -> None:
    eng, initial = audit_engine(ambiguous_component(tmp_path))
    paused = eng.run(initial)
    assert isinstance(paused.stop_reason, HitlGatePending)
    done = eng.resume(
        paused.stop_reason.gate_id, GateDecision.reject(by="bob", reason="BSD-3-Clause")
    )
    assert isinstance(done.stop_reason, CriteriaMet)
    fact = license_of(done, "legacy-left-pad")
    assert fact.content == {"name": "legacy-left-pad", "spdx": "BSD-3-Clause", "source": "human"}


def test_without_a_reviewer_the_unknown_goes_to_the_human_gate_as_before() -> None:
    eng, initial = audit_engine(VENDORED_MIT, with_reviewer=False)
    paused = eng.run(initial)
    assert isinstance(paused.stop_reason, HitlGatePending)
    assert paused.stop_reason.agent_id == "licenses"
    done = eng.resume(paused.stop_reason.gate_id, GateDecision.approve(by="alice"))
    assert isinstance(done.stop_reason, CriteriaMet)
    assert done.usage.total_tokens == 0


def test_a_package_with_no_license_file_goes_to_the_human_even_with_a_reviewer(
    tmp_path: Path,
) -> None:
    empty = tmp_path / "legacy-left-pad"
    empty.mkdir()
    eng, initial = audit_engine(empty)
    paused = eng.run(initial)
    assert isinstance(paused.stop_reason, HitlGatePending)
    assert paused.stop_reason.agent_id == "licenses"


def test_the_reviewed_job_file_without_a_model_runs_as_the_vendored_audit() -> None:
    job = load_job(ROOT / "examples" / "dependency_audit" / "reviewed.yaml")
    engine = job.build_engine()
    assert REVIEWER not in engine.registry.names
    assert "license_files" in engine.registry.names


def test_converge_run_of_the_reviewed_job_offline_asks_a_human_then_approval_completes_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CONVERGE_MODEL", "test")
    monkeypatch.chdir(ROOT)
    db = ["--db", f"sqlite:///{tmp_path / 'runs.db'}"]
    res = CliRunner().invoke(app, ["run", "examples/dependency_audit/reviewed.yaml", "--json", *db])
    assert res.exit_code == 10, res.output
    reason = json.loads(res.stdout)["stop_reason"]
    assert reason["agent_id"] == REVIEWER  # TestModel answers with confidence 0
    assert "legacy-left-pad is " in reason["summary"]
    done = CliRunner().invoke(app, ["approve", reason["gate_id"], "--by", "alice", *db])
    assert done.exit_code == 0, done.output


def test_the_review_names_the_package_it_was_asked_about_whatever_the_model_wrote() -> None:
    def confused(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        verdict = {"name": "some-other-package", "spdx": "MIT", "confidence": 0.9}
        return ModelResponse(
            parts=[ToolCallPart(info.output_tools[0].name, verdict)],
            usage=RequestUsage(input_tokens=10, output_tokens=5),
        )

    audit = reviewed_audit(reviewer_agent(FunctionModel(confused)), source=lambda: [APP])
    eng = Engine(budget=Budget(max_cycles=20), criteria=audit.criteria, gates=audit.gates)
    eng.register(*audit.suggestors)
    result = eng.run(
        {"vendored": [{"name": "legacy-left-pad", "version": "1", "path": str(VENDORED_MIT)}]}
    )
    assert isinstance(result.stop_reason, CriteriaMet)
    assert license_of(result, "legacy-left-pad").content["spdx"] == "MIT"


# -- an answer that is no SPDX expression (what Gemma 3 270M answered in make demo-llm) -----
GARBAGE = ["legacy-left-pad/license.file", "10.25.36.48:x86_64", ":{", "MIT License", ""]


def answering(spdx: str, confidence: float = 1.0) -> TestModel:
    """A TestModel whose verdict on legacy-left-pad is ``spdx`` with ``confidence``."""
    verdict = {"name": "legacy-left-pad", "spdx": spdx, "confidence": confidence}
    return TestModel(custom_output_args=verdict)


@pytest.mark.parametrize("garbage", GARBAGE)
def test_an_answer_that_is_no_spdx_expression_waits_at_the_gate_whatever_its_confidence(
    garbage: str, tmp_path: Path
) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'runs.db'}")
    eng, initial = audit_engine(VENDORED_MIT, model=answering(garbage, 1.0), store=store)
    paused = eng.run(initial)
    reason = paused.stop_reason
    assert isinstance(reason, HitlGatePending), reason
    assert reason.agent_id == REVIEWER
    assert f"the reviewer answered {garbage!r} for legacy-left-pad" in reason.summary
    assert "which is no known SPDX license expression (confidence 1.0)" in reason.summary
    assert not [f for f in paused.context.get("license") if f.content["name"] == "legacy-left-pad"]
    gate = store.get_gate(reason.gate_id)  # what `converge gates` and the inbox show
    assert gate.policy == NOT_SPDX_GATE
    assert gate.proposal["content"]["spdx"] == garbage
    assert gate.proposal["confidence"] == 1.0
    files = [paused.context.fact(i) for i in gate.proposal["parents"]]
    assert [f.key for f in files if f is not None] == ["license.file"]


def test_a_human_rejecting_a_garbage_answer_with_an_spdx_reason_classifies_it() -> None:
    eng, initial = audit_engine(VENDORED_MIT, model=answering("legacy-left-pad/license.file"))
    paused = eng.run(initial)
    assert isinstance(paused.stop_reason, HitlGatePending)
    done = eng.resume(paused.stop_reason.gate_id, GateDecision.reject(by="bob", reason="MIT"))
    assert done.stop_reason == CriteriaMet(criteria=["all_reviewed", "risks_assessed"])
    fact = license_of(done, "legacy-left-pad")
    assert fact.content == {"name": "legacy-left-pad", "spdx": "MIT", "source": "human"}


def test_a_human_approving_a_garbage_answer_with_a_value_classifies_it(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'runs.db'}")
    eng, initial = audit_engine(VENDORED_MIT, model=answering(":{"), store=store)
    paused = eng.run(initial)
    reason = paused.stop_reason
    assert isinstance(reason, HitlGatePending)
    assert eng.hitl_policies[1].validate_value is spdx_value
    # what `converge approve GATE --value mit` records, checked by the gate's hook
    value = spdx_value("mit", store.get_gate(reason.gate_id).proposal["content"])
    done = eng.resume(reason.gate_id, GateDecision.approve(by="alice", value=value))
    assert isinstance(done.stop_reason, CriteriaMet)
    assert license_of(done, "legacy-left-pad").content["spdx"] == "MIT"
    assert license_of(done, "legacy-left-pad").content["source"] == "human"


def test_a_garbage_answer_approved_as_it_is_leaves_the_package_unclassified() -> None:
    eng, initial = audit_engine(VENDORED_MIT, model=answering("10.25.36.48:x86_64"))
    paused = eng.run(initial)
    assert isinstance(paused.stop_reason, HitlGatePending)
    done = eng.resume(paused.stop_reason.gate_id, GateDecision.approve(by="alice"))
    assert isinstance(done.stop_reason, CriteriaUnmet), done.stop_reason
    assert done.stop_reason.criteria == ["all_reviewed"]
    report = next(c for c in done.criteria if c.id == "all_reviewed")
    assert "legacy-left-pad: the reviewer's answer '10.25.36.48:x86_64' is no SPDX" in str(
        report.reason
    )


def _reviewed_at_confidence_1(answer: str) -> tuple[Engine, RunResult]:
    """The audit of the vendored left-pad run with a reviewer that answers ``answer`` at
    confidence 1.0: its engine and what the run gave."""
    eng, initial = audit_engine(VENDORED_MIT, model=answering(answer, 1.0))
    return eng, eng.run(initial)


@pytest.mark.parametrize("answer", ["NOASSERTION", "LicenseRef-Left-Pad", "Foo-License-9.9"])
def test_an_answer_that_asserts_no_known_license_waits_at_the_gate_at_confidence_1(
    answer: str,
) -> None:
    eng, paused = _reviewed_at_confidence_1(answer)
    reason = paused.stop_reason
    assert isinstance(reason, HitlGatePending), reason
    assert f"answered {answer!r} for legacy-left-pad, which is no known SPDX" in reason.summary
    done = eng.resume(reason.gate_id, GateDecision.approve(by="alice"))
    # approved as it is: NOASSERTION and a LicenseRef classify it, another id does not
    expected = CriteriaUnmet if answer == "Foo-License-9.9" else CriteriaMet
    assert isinstance(done.stop_reason, expected), done.stop_reason


@pytest.mark.parametrize("expression", ["MIT", "Apache-2.0 OR MIT", "GPL-2.0+"])
def test_a_valid_expression_with_confidence_1_is_promoted_without_a_gate(
    expression: str,
) -> None:
    _, result = _reviewed_at_confidence_1(expression)
    assert result.stop_reason == CriteriaMet(criteria=["all_reviewed", "risks_assessed"])
    fact = license_of(result, "legacy-left-pad")
    assert fact.content["spdx"] == expression  # as the reviewer wrote it
    assert fact.provenance.suggestor == REVIEWER
    assert [s for s in result.signals if isinstance(s, HitlGatePending)] == []


def test_not_spdx_judges_the_answer_with_license_expressions_parser() -> None:
    def review(spdx: object) -> Proposal:
        return Proposal("license", {"name": "x", "spdx": spdx, "source": "reviewer"}, 1.0)

    ctx = Context()
    assert not not_spdx(review("GPL-2.0-or-later WITH Classpath-exception-2.0"), ctx)
    assert not not_spdx(review("mit OR Apache-2.0"), ctx)
    assert not_spdx(review("NOASSERTION"), ctx)
    assert not_spdx(review("LicenseRef-Left-Pad"), ctx)
    assert not_spdx(review("LicenseRef-scancode-public-domain"), ctx)  # known to the parser
    assert not_spdx(review("MIT OR"), ctx)
    assert not_spdx(review("NotALicense-9.9"), ctx)
    assert not_spdx(review(None), ctx)


def test_the_job_files_gates_are_those_of_reviewed_audit() -> None:
    job = load_job(ROOT / "examples" / "dependency_audit" / "reviewed.yaml")
    python = reviewed_audit(None, source=lambda: [APP]).gates
    hitl = [spec.hitl for spec in job.spec.gates if spec.hitl is not None]
    assert [h.summary for h in hitl] == [p.summary for p in python]
    assert [h.when for h in hitl] == [
        "examples.dependency_audit.reviewer:needs_human",
        "examples.dependency_audit.reviewer:not_spdx",
        "examples.dependency_audit.reviewer:uncertain",
    ]
    assert [h.name for h in hitl] == [None, NOT_SPDX_GATE, None]
    hooks = [h.validate_value for h in hitl]
    assert hooks == [
        None,
        "examples.dependency_audit:spdx_value",
        "examples.dependency_audit:spdx_value",
    ]
