"""Jobs the replay tests (tests/test_replay.py) record and replay.

- :func:`three_agents`: researcher (tool ``lookup``) → writer (tool
  ``word_count``) → critic (tool ``grade``, output :class:`Verdict`) → ``publish``,
  each agent scripted with pydantic-ai's FunctionModel (:func:`live_models`) and
  priced, under a cost budget; :func:`silent` gives models that fail the test
  when a replay asks them (``CALLED`` lists what reached them).
- :func:`reviewer_engine`: the dependency audit with the LLM license reviewer.
- :func:`job_text`: the three agents as a job file (``model`` from
  ``$CONVERGE_MODEL``), with the plain suggestor ``summary``, ``stamp``
  (``deterministic=False``) and ``sampler`` (named in ``nondeterministic:``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from audit import SqlRunStore
from converge.agents import agent_suggestor
from engine import Budget, Context, Engine, Proposal, RunStore, suggestor
from examples.dependency_audit import Distribution, no_forbidden_license
from examples.dependency_audit.reviewer import reviewed_audit, reviewer_agent

APP = Distribution("app", "1.0", license_expression="Apache-2.0")
PRICE = (1.0, 2.0)
USAGE = RequestUsage(input_tokens=40, output_tokens=10)
AGENTS = ("researcher", "writer", "critic")

CALLED: list[str] = []
"""Requests that reached a model a replay must not call."""


def forbidden(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """A model a replay must never ask."""
    CALLED.append(str(messages[-1]))
    raise AssertionError("a replay called the model")


def silent() -> dict[str, Any]:
    """Each agent's model: one that fails the test when asked."""
    return dict.fromkeys(AGENTS, FunctionModel(forbidden))


# -- three agents with tools ----------------------------------------------------------------
def lookup(text: str) -> str:
    """The researcher's tool."""
    return f"{len(text)} characters about {text[:16]}"


def word_count(text: str) -> int:
    """The writer's tool."""
    return len(text.split())


def grade(text: str) -> int:
    """The critic's tool: a score of the draft."""
    return len(text) % 7


def grade_v2(text: str) -> int:
    """The critic's tool, changed: another score."""
    return len(text) % 7 + 1


class Verdict(BaseModel):
    """The critic's output."""

    score: int
    ok: bool


def scripted(tool: str, answer: Callable[[str], Any]) -> FunctionModel:
    """A model that calls ``tool`` on the end of its prompt, then answers ``answer``
    of the tool's result (as the output tool's arguments when there is one)."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
        if not returns:
            prompt = next(p for p in messages[-1].parts if isinstance(p, UserPromptPart))
            args = {"text": str(prompt.content)[-40:]}
            return ModelResponse(parts=[ToolCallPart(tool, args)], usage=USAGE)
        output = answer(str(returns[0].content))
        if info.output_tools:
            part: Any = ToolCallPart(info.output_tools[0].name, output)
        else:
            part = TextPart(str(output))
        return ModelResponse(parts=[part], usage=USAGE)

    return FunctionModel(model)


def live_models() -> dict[str, FunctionModel]:
    """The three agents' scripted models."""
    return {
        "researcher": scripted("lookup", lambda r: f"note: {r}"),
        "writer": scripted("word_count", lambda r: f"draft of {r} words"),
        "critic": scripted("grade", lambda r: {"score": int(r), "ok": int(r) > 2}),
    }


@suggestor(name="publish", dependencies=["verdict"])
def publish(ctx: Context) -> list[Proposal]:
    """Publishes the critic's verdict."""
    v = ctx.get("verdict")[-1].content
    return [Proposal("published", {"score": v["score"], "ok": v["ok"]})]


@suggestor(name="publish", dependencies=["verdict"])
def publish_v2(ctx: Context) -> list[Proposal]:
    """``publish`` after a change: it publishes the score doubled."""
    v = ctx.get("verdict")[-1].content
    return [Proposal("published", {"score": 2 * v["score"], "ok": v["ok"]})]


def three_agents(
    store: RunStore | None,
    models: dict[str, Any] | None = None,
    *,
    publisher: Any = publish,
    critic_tool: Callable[..., int] = grade,
) -> Engine:
    """The three agents and ``publish`` on ``store`` (see the module docstring)."""
    m = models or live_models()
    researcher: Agent[None, str] = Agent(m["researcher"], tools=[lookup])
    writer: Agent[None, str] = Agent(m["writer"], tools=[word_count])
    critic: Agent[None, Verdict] = Agent(m["critic"], output_type=Verdict, tools=[critic_tool])
    engine = Engine(budget=Budget(max_cycles=10, max_cost_usd=1.0), store=store)
    engine.register(
        agent_suggestor(researcher, name="researcher", reads=["topic"], writes="note", price=PRICE),
        agent_suggestor(writer, name="writer", reads=["note"], writes="draft", price=PRICE),
        agent_suggestor(critic, name="critic", reads=["draft"], writes="verdict", price=PRICE),
        publisher,
    )
    return engine


def no_model(store: RunStore) -> Engine:
    """The three agents on models that fail the test when asked."""
    return three_agents(store, silent())


# -- the LLM license reviewer ---------------------------------------------------------------
def reviewer_engine(store: RunStore | None, model: Any | None) -> Engine:
    """The reviewed dependency audit on ``model`` (tests/test_agents_license_reviewer.py;
    ``None``: the audit without its reviewer agent), recorded in ``store`` if any."""
    reviewer = None if model is None else reviewer_agent(model)
    audit = reviewed_audit(reviewer, source=lambda: [APP], price=(0.15, 0.6))
    engine = Engine(
        budget=Budget(max_cycles=20, max_cost_usd=1.0),
        criteria=audit.criteria,
        invariants=[no_forbidden_license],
        gates=audit.gates,
        store=store,
    )
    return engine.register(*audit.suggestors)


def reviewer_initial(path: Path) -> dict[str, list[Any]]:
    """The reviewed audit's input: a policy and the vendored component at ``path``."""
    return {
        "policy": [{"root": "app", "forbidden": ["AGPL-3.0-only"]}],
        "vendored": [{"name": "legacy-left-pad", "version": "0.3.1", "path": str(path)}],
    }


# -- the three agents as a job file -----------------------------------------------------------
def summarise(ctx: Context) -> list[Proposal]:
    """How many notes and drafts there are."""
    return [Proposal("summary", {"notes": len(ctx.get("note")), "drafts": len(ctx.get("draft"))})]


def summarise_v2(ctx: Context) -> list[Proposal]:
    """``summarise`` after a change: it miscounts the drafts."""
    return [Proposal("summary", {"notes": len(ctx.get("note")), "drafts": -1})]


summary = suggestor(name="summary", dependencies=["draft"])(summarise)
summary_v2 = suggestor(name="summary", dependencies=["draft"])(summarise_v2)
TICKS = itertools.count()


@suggestor(name="stamp", dependencies=["topic"], deterministic=False)
def stamp(ctx: Context) -> list[Proposal]:
    """Not deterministic: a new number at every execution (a clock, a sample)."""
    return [Proposal("stamp", next(TICKS))]


@suggestor(name="sampler", dependencies=["topic"])
def sampler(ctx: Context) -> list[Proposal]:
    """Not deterministic either, marked so by the job file's ``nondeterministic:``."""
    return [Proposal("sample", next(TICKS))]


AGENT = """\
  - name: {name}
    instructions: {instructions}
    reads: [{reads}]
    writes: {writes}
    tools: [tests.replayjobs:{tool}]
    price: [1.0, 2.0]
"""


def job_text(*, summary_ref: str = "summary", tool: str = "grade") -> str:
    """The job file of the three agents (``summary_ref``: the summary suggestor's
    attribute; ``tool``: the critic's)."""
    agents = "".join(
        AGENT.format(name=n, instructions=i, reads=r, writes=w, tool=t)
        for n, i, r, w, t in (
            ("researcher", "Research the topic.", "topic", "note", "lookup"),
            ("writer", "Write a draft.", "note", "draft", "word_count"),
            ("critic", "Grade the draft.", "draft", "verdict", tool),
        )
    )
    return (
        "name: three-agents\n"
        f"suggestors: [tests.replayjobs:{summary_ref}, tests.replayjobs:stamp,"
        " tests.replayjobs:sampler]\n"
        "nondeterministic: [sampler]\n"
        f"agents:\n{agents}"
        "budget: {max_cycles: 10, max_cost_usd: 1.0}\n"
        "initial: {topic: [replay]}\n"
    )


# -- what the tests compare ------------------------------------------------------------------
def chain(store: SqlRunStore, run_id: str) -> tuple[int, str | None, int]:
    """What must not change in the recorded store: the run's last seq and head hash,
    and how many runs the store holds."""
    row = store.run(run_id)
    return row.last_seq, row.head_hash, len(store.runs(limit=1000))


def said(response: ModelResponse) -> list[tuple[str, Any, Any]]:
    """What a response's parts say: their type, content and arguments."""
    return [
        (type(p).__name__, getattr(p, "content", None), getattr(p, "args", None))
        for p in response.parts
    ]
