"""OpenTelemetry traces: a span per run and per execution with the GenAI attributes,
the stop reason on the run span; off unless asked; OTLP to the OTEL_* endpoint."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage
from typer.testing import CliRunner

from converge.agents import agent_suggestor
from converge.cli import app
from converge.telemetry import Tracing, requested
from engine import Budget, Context, Engine, Proposal, suggestor

pytestmark = pytest.mark.usefixtures("no_model_requests")


def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(
        parts=[TextPart("a summary")], usage=RequestUsage(input_tokens=120, output_tokens=30)
    )


@suggestor(name="collector", dependencies=["topic"])
def collector(ctx: Context) -> list[Proposal]:
    return [Proposal("note", f"about {ctx.get('topic')[0].content}")]


def traced_demo() -> tuple[InMemorySpanExporter, str]:
    exporter = InMemorySpanExporter()
    tracing = Tracing.start(exporter)
    eng = Engine(budget=Budget(max_cycles=5))
    agent: Agent[None, str] = Agent(FunctionModel(answer, model_name="scripted"))
    eng.register(
        collector,
        agent_suggestor(agent, name="summariser", reads=["note"], writes="summary"),
    )
    result = tracing.run(tracing.instrument(eng), "demo", {"topic": ["licenses"]})
    tracing.shutdown()
    return exporter, result.run_id


def test_a_run_is_a_workflow_span_whose_children_are_its_executions() -> None:
    exporter, _ = traced_demo()
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert set(spans) == {
        "invoke_workflow demo",
        "execute_tool collector",
        "invoke_agent summariser",
        "chat scripted",  # the agent's model request, under its agent span
    }
    request = spans["chat scripted"].parent
    assert (
        request is not None and request.span_id == spans["invoke_agent summariser"].context.span_id
    )
    run = spans["invoke_workflow demo"]
    for child in ("execute_tool collector", "invoke_agent summariser"):
        parent = spans[child].parent
        assert parent is not None and parent.span_id == run.context.span_id
        assert spans[child].context.trace_id == run.context.trace_id


def test_the_run_span_carries_the_stop_reason_its_category_and_the_run_id() -> None:
    exporter, run_id = traced_demo()
    run = next(s for s in exporter.get_finished_spans() if s.name.startswith("invoke_workflow"))
    attrs = dict(run.attributes or {})
    assert attrs["gen_ai.operation.name"] == "invoke_workflow"
    assert attrs["gen_ai.conversation.id"] == run_id
    assert attrs["converge.stop_reason"] == "converged"
    assert attrs["converge.stop_category"] == "success"
    assert attrs["gen_ai.usage.input_tokens"] == 120
    assert attrs["gen_ai.usage.output_tokens"] == 30


def test_an_agent_span_carries_the_gen_ai_attributes_and_its_usage() -> None:
    exporter, run_id = traced_demo()
    agent = next(s for s in exporter.get_finished_spans() if s.name == "invoke_agent summariser")
    attrs = dict(agent.attributes or {})
    assert attrs["gen_ai.operation.name"] == "invoke_agent"
    assert attrs["gen_ai.agent.name"] == "summariser"
    assert attrs["gen_ai.conversation.id"] == run_id
    assert attrs["gen_ai.request.model"] == "scripted"
    assert attrs["gen_ai.usage.input_tokens"] == 120
    assert attrs["gen_ai.usage.output_tokens"] == 30
    tool = next(s for s in exporter.get_finished_spans() if s.name == "execute_tool collector")
    assert dict(tool.attributes or {})["gen_ai.operation.name"] == "execute_tool"


def test_tracing_is_off_unless_asked() -> None:
    assert not requested(False, {})
    assert requested(True, {})
    assert requested(False, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})
    assert requested(False, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://x/v1/traces"})


class Collector(BaseHTTPRequestHandler):
    received: list[tuple[str, int]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        Collector.received.append((self.path, len(body)))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def otlp_endpoint() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), Collector)
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    Collector.received = []
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def test_converge_run_otel_exports_to_the_otlp_endpoint_of_the_environment(
    tmp_path: Path, otlp_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp_endpoint)
    job = tmp_path / "job.yaml"
    job.write_text("name: ticker\nsuggestors: [tests.jobfixtures:tick]\nbudget: {max_cycles: 2}\n")
    res = CliRunner().invoke(app, ["run", str(job), "--no-audit", "--otel"])
    assert res.exit_code == 3, res.output
    assert [path for path, _ in Collector.received] == ["/v1/traces"]
    assert Collector.received[0][1] > 0
