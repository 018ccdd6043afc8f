"""What a real model does wrong ends typed, never crashes or hangs, against a local
OpenAI-compatible server that misbehaves on purpose (tests/fakeopenai.py): malformed
structured output, no tool call, a server that is down, a server slower than the
time budget; a model whose responses carry their own cost; a job file's agent on
a base URL with its model settings, needing no API key."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from audit import open_store
from converge.agents import AgentSuggestor, build_agent
from converge.jobs import load_job
from engine import (
    Budget,
    CostBudgetExhausted,
    Engine,
    Error,
    ErrorCategory,
    RunResult,
    TimeBudgetExhausted,
)
from tests.fakeopenai import Hang, completion, fake_openai, free_port

NAMED_OUTPUT = {"tool_choice": {"type": "function", "function": {"name": "final_result"}}}


class Verdict(BaseModel):
    """What the reviewer answers."""

    name: str
    spdx: str


def lookup(query: str) -> str:
    """A tool the agent may call."""
    return f"found {query}"


@pytest.fixture(autouse=True)
def no_key_no_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """No API key and no model or base URL of the machine's environment."""
    for name in ("OPENAI_API_KEY", "CONVERGE_MODEL", "CONVERGE_MODEL_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def run_reviewer(
    url: str,
    budget: Budget,
    *,
    tmp_path: Path,
    settings: dict[str, Any] | None = None,
    per: str | None = None,
    initial: dict[str, list[Any]] | None = None,
) -> tuple[RunResult, Any]:
    store = open_store(f"sqlite:///{tmp_path / 'runs.db'}")
    agent = reviewer(url, lookup, model_settings={"max_retries": 0, **(settings or {})}, per=per)
    engine = Engine(budget=budget, store=store)
    engine.register(agent)
    result = engine.run(initial or LEFT_PAD)
    return result, store


LEFT_PAD = {"license.file": [{"name": "left-pad", "text": "MIT..."}]}
"""The reviewer's one file to review."""


def reviewer(
    url: str,
    lookup: Callable[[str], str],
    *,
    model_settings: dict[str, Any] | None = None,
    per: str | None = None,
) -> AgentSuggestor:
    """The agent ``reviewer`` on ``openai:small-local`` at ``url``: names the SPDX license
    of each ``license.file`` as a :class:`Verdict`, with the one tool ``lookup``."""
    return build_agent(
        name="reviewer",
        model="openai:small-local",
        instructions="Name the SPDX license.",
        reads=["license.file"],
        writes="license",
        output=Verdict,
        tools=[lookup],
        base_url=url,
        model_settings=model_settings,
        per=per,
    )


def executed(store: Any, run_id: str) -> list[dict[str, Any]]:
    return [e.payload for e in store.events(run_id, ["suggestor_executed"])]


def test_malformed_structured_output_is_retried_then_a_typed_stop_naming_the_agent(
    tmp_path: Path,
) -> None:
    bad = '{"name": "left-pad", "spdx": '  # cut-off JSON, as a small model writes
    replies = [
        completion(tool="final_result", arguments=bad, prompt_tokens=90 + i) for i in range(3)
    ]
    with fake_openai(replies) as server:
        result, store = run_reviewer(server.url, Budget(max_cycles=5), tmp_path=tmp_path)
    reason = result.stop_reason
    assert isinstance(reason, Error) and reason.error_category is ErrorCategory.SUGGESTOR
    assert "reviewer" in reason.message and "openai:small-local" in reason.message
    assert len(server.requests) == 2  # the answer, then pydantic-ai's one output retry
    # the retry sends the bad answer back with a string content (llama.cpp refuses null)
    sent_back = [m for m in server.requests[1]["messages"] if m["role"] == "assistant"]
    assert sent_back and all(m["content"] == "" for m in sent_back)
    # the tokens of both responses count, and the raw text is in the audit
    assert result.usage.input_tokens == 90 + 91 and result.usage.output_tokens == 20
    event = executed(store, result.run_id)[-1]
    assert event["stopped_inside"] == "error"
    assert event["raw_output"] == [f"final_result({bad})"] * 2
    assert event["messages"]
    assert not result.context.get("license")


def test_a_model_that_answers_text_instead_of_calling_the_output_tool_stops_typed(
    tmp_path: Path,
) -> None:
    replies = [completion("I believe this is the MIT license.") for _ in range(3)]
    with fake_openai(replies) as server:
        result, store = run_reviewer(server.url, Budget(max_cycles=5), tmp_path=tmp_path)
    reason = result.stop_reason
    assert isinstance(reason, Error) and reason.error_category is ErrorCategory.SUGGESTOR
    assert reason.message.startswith("reviewer: model openai:small-local gave no valid output")
    assert server.requests[0]["tool_choice"] == "required"
    assert executed(store, result.run_id)[-1]["raw_output"][0].startswith("I believe")
    assert result.usage.total_tokens == 2 * 110


def test_a_server_that_is_down_is_an_external_error(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    result, _ = run_reviewer(url, Budget(max_cycles=5), tmp_path=tmp_path)
    reason = result.stop_reason
    assert isinstance(reason, Error) and reason.error_category is ErrorCategory.EXTERNAL
    assert reason.message.startswith(f"reviewer: model openai:small-local at {url} failed: ")
    assert result.usage.total_tokens == 0


def test_a_server_slower_than_the_time_budget_is_cut_inside_the_call_keeping_usage_so_far(
    tmp_path: Path,
) -> None:
    hang = Hang()
    # the first response (a tool call) arrives; the second never does
    replies = [completion(tool="lookup", arguments='{"query": "MIT"}', prompt_tokens=70), hang]
    with fake_openai(replies) as server:
        result, store = run_reviewer(server.url, Budget(max_seconds=1.0), tmp_path=tmp_path)
        assert hang.disconnected.wait(10)  # the call was cut: its connection closed
    assert isinstance(result.stop_reason, TimeBudgetExhausted)
    assert len(server.requests) == 2
    # the tokens of the response received before the cut are the run's
    assert (result.usage.input_tokens, result.usage.output_tokens) == (70, 10)
    recorded = [e.payload for e in store.events(result.run_id, ["usage_recorded"])]
    assert recorded and recorded[0]["usage"][:2] == [70, 10]


def test_a_model_whose_responses_carry_their_cost_stops_after_the_call_that_crosses_the_budget(
    tmp_path: Path,
) -> None:
    # no price: and no genai-prices entry; each response reports 0.004 USD itself
    replies = [
        completion(
            tool="final_result", arguments=f'{{"name": "p{i}", "spdx": "MIT"}}', cost="0.004"
        )
        for i in range(5)
    ]
    files = {"license.file": [{"name": f"p{i}", "text": "MIT"} for i in range(5)]}
    with fake_openai(replies) as server:
        result, _ = run_reviewer(
            server.url, Budget(max_cost_usd=0.01), tmp_path=tmp_path, per="name", initial=files
        )
    # 0.004 + 0.004 fit; the third call crosses 0.01 and is the last
    assert result.stop_reason == CostBudgetExhausted(cost_usd=0.012, limit_usd=0.01)
    assert len(server.requests) == 3
    assert result.usage.cost_usd == pytest.approx(0.012)


def test_a_model_that_cannot_be_priced_at_all_stops_after_its_first_call(tmp_path: Path) -> None:
    replies = [completion(tool="final_result", arguments='{"name": "a", "spdx": "MIT"}')]
    with fake_openai(replies) as server:
        result, _ = run_reviewer(server.url, Budget(max_cost_usd=0.01), tmp_path=tmp_path)
    reason = result.stop_reason
    assert isinstance(reason, Error) and reason.error_category is ErrorCategory.CONFIGURATION
    assert "openai:small-local" in reason.message and "cannot be priced" in reason.message
    assert len(server.requests) == 1


JOB = """\
name: reviewed-locally
suggestors: [examples.dependency_audit.reviewer:reviewer_decisions]
agents:
  - name: reviewer
    model: openai:small-local
    base_url: {url}
    instructions: Name the SPDX license.
    reads: [license.file]
    writes: license
    output: tests.test_bad_models:Verdict
    model_settings:
      max_tokens: 64
      temperature: 0
      max_retries: 0
budget: {{max_cycles: 3}}
initial:
  license.file: [{{name: left-pad, text: "MIT..."}}]
"""


def test_a_job_files_openai_model_on_a_base_url_reaches_chat_completions_with_its_settings(
    tmp_path: Path,
) -> None:
    replies = [completion(tool="final_result", arguments='{"name": "left-pad", "spdx": "MIT"}')]
    with fake_openai(replies) as server:
        path = tmp_path / "job.yaml"
        path.write_text(JOB.format(url=server.url))
        job = load_job(str(path))
        result = job.build_engine().run(job.spec.initial)
    assert result.stop_reason.is_success(), result.stop_reason
    assert [f.content for f in result.context.get("license")] == [
        {"name": "left-pad", "spdx": "MIT"}
    ]
    body = server.requests[0]
    assert body["model"] == "small-local"
    assert body["max_tokens"] == 64 and "max_completion_tokens" not in body
    assert body["temperature"] == 0
    # the output tool, alone, is named (a llama.cpp server ignores "required")
    assert body["tool_choice"] == NAMED_OUTPUT["tool_choice"]
    assert server.authorization == ["Bearer not-needed"]  # no API key was needed
    assert (result.usage.input_tokens, result.usage.output_tokens) == (100, 10)


def test_the_base_url_comes_from_the_environment_and_an_api_key_that_is_set_is_sent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    replies = [completion(tool="final_result", arguments='{"name": "a", "spdx": "MIT"}')]
    with fake_openai(replies) as server:
        monkeypatch.setenv("CONVERGE_MODEL_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-local")
        result, _ = run_reviewer("", Budget(max_cycles=3), tmp_path=tmp_path)
    assert result.stop_reason.is_success(), result.stop_reason
    assert server.authorization == ["Bearer sk-local"]
    assert server.requests[0]["model"] == "small-local"


def test_a_base_url_for_a_model_that_is_not_openai_is_an_error_naming_the_field(
    tmp_path: Path,
) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(JOB.format(url="http://127.0.0.1:9/v1").replace("openai:small-local", "test"))
    job = load_job(str(path))
    with pytest.raises(Exception) as caught:
        job.build_engine()
    assert "agents.0.model" in str(caught.value) and "base_url applies to openai" in str(
        caught.value
    )
