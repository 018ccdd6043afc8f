"""Job files with ``agents:`` entries: offline with ``model: test``, the model from
``$CONVERGE_MODEL``, and errors that name the file, the line and the field."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from converge.agents import AgentSuggestor
from converge.errors import JobFileError
from converge.jobs import parse_job
from engine import Effect, FunctionSuggestor

TOOL_CALLS: list[str] = []


class Verdict(BaseModel):
    """An output model referenced by the job files below."""

    spdx: str
    confidence: float


def spdx_lookup(text: str) -> str:
    """A tool referenced by the job files below."""
    TOOL_CALLS.append(text)
    return "MIT"


pytestmark = pytest.mark.usefixtures("no_model_requests")


JOB = """\
name: reviewed
suggestors: [tests.test_agents_jobs:idle]
agents:
  - name: reviewer
    model: test
    instructions: Name the SPDX license of the text.
    reads: [license.text]
    writes: license
    output: tests.test_agents_jobs:Verdict
    tools: [tests.test_agents_jobs:spdx_lookup]
    price: [0.15, 0.6]
budget: {max_cycles: 5, max_cost_usd: 1.0}
initial: {license.text: ["Permission is hereby granted, free of charge"]}
"""


def test_a_job_with_an_agent_on_the_test_model_runs_offline_and_promotes_its_output() -> None:
    TOOL_CALLS.clear()
    job = parse_job(JOB, "reviewed.yaml")
    engine = job.build_engine()
    result = engine.run(job.spec.initial)
    assert result.stop_reason.is_success()
    (fact,) = result.context.get("license")
    assert set(fact.content) == {"spdx", "confidence"}
    assert fact.provenance.suggestor == "reviewer"
    assert fact.provenance.parents == (result.context.get("license.text")[0].id,)
    assert TOOL_CALLS  # TestModel calls every tool once
    assert result.usage.total_tokens > 0
    assert result.usage.cost_usd > 0  # priced with the job's price


def test_an_agents_model_defaults_to_converge_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONVERGE_MODEL", "test")
    job = parse_job(JOB.replace("    model: test\n", ""), "reviewed.yaml")
    engine = job.build_engine()
    agent = engine.registry.suggestors[-1]
    assert isinstance(agent, AgentSuggestor)
    assert agent.agent.model is not None


def test_an_agent_without_any_model_is_an_error_naming_the_entry() -> None:
    job = parse_job(JOB.replace("    model: test\n", ""), "reviewed.yaml")
    with pytest.raises(JobFileError) as err:
        job.build_engine()
    assert "reviewed.yaml:4" in str(err.value)
    assert "agents.0" in str(err.value)
    assert "CONVERGE_MODEL" in str(err.value)


def test_an_agent_with_if_no_model_skip_is_left_out_when_no_model_is_set() -> None:
    text = JOB.replace("    model: test\n", "    if_no_model: skip\n")
    engine = parse_job(text, "reviewed.yaml").build_engine()
    assert engine.registry.names == ["idle"]


@pytest.mark.parametrize(
    ("was", "now", "file", "named"),
    [
        pytest.param(
            "model: test",
            "model: nosuchprovider:big",
            "reviewed.yaml",
            ["agents.0.model", "nosuchprovider:big"],
            id="a-model-pydantic-ai-cannot-use-names-the-model-field",
        ),
        pytest.param(
            "test_agents_jobs:Verdict",
            "test_agents_jobs:Nope",
            "j.yaml",
            ["j.yaml:9", "agents.0.output"],
            id="a-bad-output-reference-names-its-field-and-line",
        ),
    ],
)
def test_an_agent_that_cannot_be_built_is_refused_naming_its_field(
    was: str, now: str, file: str, named: list[str]
) -> None:
    job = parse_job(JOB.replace(was, now), file)
    with pytest.raises(JobFileError) as err:
        job.build_engine()
    for part in named:
        assert part in str(err.value)


def test_a_negative_price_is_refused_when_the_job_is_read() -> None:
    with pytest.raises(JobFileError) as err:
        parse_job(JOB.replace("[0.15, 0.6]", "[-1, 0.6]"), "j.yaml")
    assert "agents.0" in str(err.value)


def test_an_openai_compatible_local_server_is_configured_by_base_url_without_a_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("CONVERGE_MODEL", "openai:llama3.2")
    job = parse_job(JOB.replace("    model: test\n", ""), "reviewed.yaml")
    agent = job.build_engine().registry.suggestors[-1]
    assert isinstance(agent, AgentSuggestor)
    model = agent.agent.model
    assert model is not None and not isinstance(model, str)
    assert model.model_name == "llama3.2"
    assert model.base_url is not None and model.base_url.startswith("http://127.0.0.1:9/v1")


idle = FunctionSuggestor(lambda ctx: Effect.none(), "idle")
"""A plain suggestor the skip test registers."""


def test_the_usage_of_a_job_agent_respects_the_cost_budget_of_the_job() -> None:
    job = parse_job(JOB.replace("max_cost_usd: 1.0", "max_cost_usd: 0.0000001"), "j.yaml")
    result = job.build_engine().run(job.spec.initial)
    assert result.stop_reason.is_budget_exhausted()
