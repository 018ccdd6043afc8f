"""An agent whose model server does not serve its model, is down or dies mid-run
stops with a typed error naming the base URL and the model
(converge/agents/served.py, converge/agents/call.py): a model the server does not
list is refused before the first chat call as a configuration error; a server
that cannot be reached, before or during the run, is an external error, the run's
usage and audit kept."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from audit import open_store
from converge.agents.local import SERVER_ENV, LocalModelServer
from engine import Budget, Engine, Error, ErrorCategory
from tests.fake_model_server import COMMAND
from tests.fakeopenai import completion, fake_openai, free_port
from tests.test_bad_models import LEFT_PAD, no_key_no_default, reviewer, run_reviewer

__all__ = ["no_key_no_default"]  # the autouse fixture: no key, no model of the machine

VERDICT = '{"name": "left-pad", "spdx": "MIT"}'


def test_a_model_the_server_does_not_list_is_refused_before_any_chat_call(
    tmp_path: Path,
) -> None:
    replies = [completion(tool="final_result", arguments=VERDICT)]
    with fake_openai(replies, models=["gemma3-270m", "qwen"]) as server:
        result, store = run_reviewer(server.url, Budget(max_cycles=5), tmp_path=tmp_path)
    reason = result.stop_reason
    assert isinstance(reason, Error) and reason.error_category is ErrorCategory.CONFIGURATION
    assert reason.message == (
        f"reviewer: model openai:small-local: the server at {server.url} does not serve "
        "'small-local' (it serves 'gemma3-270m', 'qwen')"
    )
    assert server.listings == 1 and server.requests == []  # no chat call
    assert store.runs()[0].stop_reason == reason  # recorded as the run's stop


def test_a_model_the_server_lists_is_called_and_the_list_is_asked_once_per_run(
    tmp_path: Path,
) -> None:
    replies = [
        completion(tool="final_result", arguments=f'{{"name": "p{i}", "spdx": "MIT"}}')
        for i in range(3)
    ]
    files = {"license.file": [{"name": f"p{i}", "text": "MIT"} for i in range(3)]}
    with fake_openai(replies, models=["small-local"]) as server:
        result, _ = run_reviewer(
            server.url, Budget(max_cycles=5), tmp_path=tmp_path, per="name", initial=files
        )
    assert result.stop_reason.is_success(), result.stop_reason
    assert len(server.requests) == 3  # three agent runs
    assert server.listings == 1  # one listing for the run


def test_a_server_that_is_down_names_the_base_url_and_the_model(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    result, _ = run_reviewer(url, Budget(max_cycles=5), tmp_path=tmp_path)
    reason = result.stop_reason
    assert isinstance(reason, Error) and reason.error_category is ErrorCategory.EXTERNAL
    assert reason.message.startswith(
        f"reviewer: model openai:small-local at {url} failed: the server cannot be reached: "
        "APIConnectionError"
    )
    assert result.usage.total_tokens == 0


def test_a_server_that_dies_mid_run_stops_it_naming_the_base_url_and_the_model_keeping_usage(
    tmp_path: Path,
) -> None:
    # a real process: its first answer calls the tool `lookup`, which kills it
    server = LocalModelServer(
        0, alias="small-local", log_dir=tmp_path, environ={**os.environ, SERVER_ENV: COMMAND}
    )
    server.start()
    killed: list[int] = []

    def lookup(query: str) -> str:
        """Kills the server."""
        assert server.process is not None
        os.kill(server.process.pid, signal.SIGKILL)
        server.process.wait()
        killed.append(server.process.pid)
        return f"found {query}"

    store = open_store(f"sqlite:///{tmp_path / 'runs.db'}")
    engine = Engine(budget=Budget(max_cycles=5), store=store)
    engine.register(reviewer(server.base_url, lookup))
    try:
        server.wait_ready(60)
        result = engine.run(LEFT_PAD)
    finally:
        server.stop()
    assert killed
    reason = result.stop_reason
    assert isinstance(reason, Error) and reason.error_category is ErrorCategory.EXTERNAL
    assert reason.message.startswith(
        f"reviewer: model openai:small-local at {server.base_url} failed: "
    )
    assert "Connection error" in reason.message
    # the first response's tokens count; the audit keeps what was exchanged
    assert (result.usage.input_tokens, result.usage.output_tokens) == (100, 10)
    event = [e.payload for e in store.events(result.run_id, ["suggestor_executed"])][-1]
    assert event["stopped_inside"] == "error" and event["usage_so_far"][:2] == [100, 10]
    assert event["messages"]
