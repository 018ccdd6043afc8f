"""Replay under other models (issue 45): a replay whose agents call other models
than the recorded run's says so, above its first divergence, and where a model comes
from (the job's ``model:`` or ``$CONVERGE_MODEL``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from audit import SqlRunStore
from converge.cli.timetravel import print_replay
from converge.timetravel import replay_run
from tests.hitlfixtures import opened_store
from tests.replayjobs import USAGE, live_models, three_agents

pytestmark = pytest.mark.usefixtures("no_model_requests")


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[SqlRunStore]:
    yield from opened_store("sqlite", tmp_path)


def test_a_replay_that_diverges_under_other_models_says_which_and_where_they_come_from(
    sqlite_store: SqlRunStore, capsys: pytest.CaptureFixture[str]
) -> None:
    recorded = three_agents(sqlite_store).run({"topic": ["replay"]})

    def other_critic(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        args = {"score": 1, "ok": False}
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, args)], usage=USAGE)

    models = {**live_models(), "critic": FunctionModel(other_critic)}
    report = replay_run(sqlite_store, recorded.run_id, lambda s: three_agents(s, models), live=True)
    print_replay(report)

    shown = capsys.readouterr().out
    assert not report.same and report.other_models
    assert any("other_critic" in m for m in report.models[1])
    assert not any("other_critic" in m for m in report.models[0])
    assert "other models:" in shown and "$CONVERGE_MODEL" in shown
    assert shown.index("other models:") < shown.index("first divergence:")
    assert report.to_dict()["models"]["recorded"] == list(report.models[0])
