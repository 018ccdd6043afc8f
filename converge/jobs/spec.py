"""The pydantic models of a job file: :class:`JobSpec` and the tables inside it.

Each model forbids unknown keys, so a typo in a job file is an error naming the
key. The format itself is described in :mod:`converge.jobs`; the reference of
every key is generated from these models (``docs/job-files.md``).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from converge.reports import ReportSpec
from engine import Budget, content_key

__all__ = [
    "MODEL_ENV",
    "AgentSpec",
    "CelerySpec",
    "ExecutorSpec",
    "GateSpec",
    "HitlSpec",
    "JobSpec",
    "MinConfidenceSpec",
    "ModelSettingsSpec",
    "SchemaSpec",
]


class HitlSpec(BaseModel):
    """``gates: [{hitl: {...}}]``: a ``gates.hitl.require_approval`` policy."""

    model_config = ConfigDict(extra="forbid")

    keys: list[str] | None = Field(
        default=None, description="Only proposals of these keys wait for a person."
    )
    suggestors: list[str] | None = Field(
        default=None, description="Only proposals of these suggestors."
    )
    confidence_at_most: float | None = Field(
        default=None, ge=0, le=1, description="Only proposals with this confidence or less (0..1)."
    )
    when: str | None = Field(
        default=None, description="A reference to `predicate(proposal, ctx) -> bool`."
    )
    summary: str | None = Field(
        default=None,
        description=(
            "What the person is asked; `{key}`, `{content[field]}`, `{suggestor}` are filled in."
        ),
    )
    timeout_s: float | None = Field(
        default=None, gt=0, description="Seconds before the gate decides itself (`on_timeout`)."
    )
    on_timeout: Literal["approve", "reject"] = Field(
        default="reject", description="The decision taken at the timeout."
    )
    name: str | None = Field(
        default=None, description="The gate policy's name (shown with its gates)."
    )
    approvals_required: int = Field(
        default=1,
        ge=1,
        le=100,
        description="Distinct people who must approve before the gate is decided "
        "(one rejection rejects it).",
    )
    validate_value: str | None = Field(
        default=None,
        description="'module:function' checking a human answer (`approve --value`) "
        "before it is recorded: returns the content, or raises ValueError.",
    )
    approvers: list[str] | None = Field(
        default=None,
        description="People or groups (`converge user add NAME --group G`) who may decide "
        "this gate; none given: any approver.",
    )
    four_eyes: bool = Field(
        default=False,
        description="Deciders must differ from whoever submitted or resumed the run.",
    )
    reason_required: Literal["reject", "approve", "both", "never"] = Field(
        default="reject", description="Which decisions must give a reason."
    )
    escalate_after_s: float | None = Field(
        default=None,
        gt=0,
        description="Seconds after the gate opens when its approvers widen to `escalate_to`.",
    )
    escalate_to: list[str] | None = Field(
        default=None, description="People or groups added to the approvers at escalation."
    )
    notify: list[dict[str, str]] = Field(
        default_factory=list,
        description="Sinks told when the gate opens, is decided, expires or escalates: "
        "`{webhook: URL, secret_env: VAR}` (HMAC-SHA256 signed) or `{email: ADDRESS}`.",
    )


class SchemaSpec(BaseModel):
    """``gates: [{schema: {key: K, model: module:Model}}]``: content schema per key."""

    model_config = ConfigDict(extra="forbid")

    key: str = Field(description="The fact key whose proposals are validated.")
    model: str = Field(description="A reference to a pydantic model (not called).")
    on_reject: Literal["stop", "drop"] = Field(
        default="stop", description="`stop` the run, or `drop` the proposal."
    )


class MinConfidenceSpec(BaseModel):
    """``gates: [{min_confidence: {threshold: 0.5}}]``."""

    model_config = ConfigDict(extra="forbid")

    threshold: float = Field(
        ge=0, le=1, description="Proposals below this confidence are rejected (0..1)."
    )
    keys: list[str] | None = Field(
        default=None, description="Only proposals of these keys (default: all)."
    )
    on_reject: Literal["stop", "drop"] = Field(
        default="drop", description="`drop` the proposal, or `stop` the run."
    )


class GateSpec(BaseModel):
    """One entry of ``gates:``: exactly one of ``hitl``, ``schema``,
    ``min_confidence`` or ``promotion`` (a reference to a PromotionGate)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    hitl: HitlSpec | None = Field(
        default=None, description="A human-in-the-loop gate (`gates[].hitl`)."
    )
    schema_: SchemaSpec | None = Field(
        default=None,
        alias="schema",
        description="Validate the content of one key with a pydantic model.",
    )
    min_confidence: MinConfidenceSpec | None = Field(
        default=None, description="Drop or stop on proposals below a confidence."
    )
    promotion: str | None = Field(
        default=None, description="A reference to your own `PromotionGate`."
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> GateSpec:
        given = [
            n
            for n, v in (
                ("hitl", self.hitl),
                ("schema", self.schema_),
                ("min_confidence", self.min_confidence),
                ("promotion", self.promotion),
            )
            if v is not None
        ]
        if len(given) != 1:
            raise ValueError(
                "a gate needs exactly one of hitl, schema, min_confidence, promotion; "
                f"got {given or 'none'}"
            )
        return self


class ModelSettingsSpec(BaseModel):
    """``agents[].model_settings``: what each request to the agent's model carries
    (pydantic-ai ``ModelSettings``; a local server needs ``max_tokens`` and, for a
    structured output on a small model, the output tool named in ``extra_body``)."""

    model_config = ConfigDict(extra="forbid")

    max_tokens: int | None = Field(
        default=None, gt=0, description="Most tokens one response may generate."
    )
    temperature: float | None = Field(
        default=None, ge=0, le=2, description="Sampling temperature (0: greedy)."
    )
    top_p: float | None = Field(default=None, gt=0, le=1, description="Nucleus sampling (0..1].")
    seed: int | None = Field(default=None, description="Sampling seed, where the server takes one.")
    stop_sequences: list[str] | None = Field(default=None, description="Texts that end a response.")
    timeout: float | None = Field(
        default=None, gt=0, description="Seconds one HTTP request may take."
    )
    max_retries: int | None = Field(
        default=None, ge=0, description="Retries of the model's SDK on a failed request."
    )
    tool_choice: Literal["auto", "none", "required"] | list[str] | None = Field(
        default=None,
        description="Which tools the model may call: `auto`, `none`, `required`, or tool names.",
    )
    extra_body: dict[str, Any] | None = Field(
        default=None,
        description="Fields merged into the request's JSON body, over pydantic-ai's own: "
        "`{tool_choice: {type: function, function: {name: final_result}}}` names the "
        "structured output's tool, which a llama.cpp server then enforces by grammar.",
    )

    def settings(self) -> dict[str, Any]:
        """The pydantic-ai ``ModelSettings`` (the fields given)."""
        return self.model_dump(exclude_none=True)


class AgentSpec(BaseModel):
    """``agents: [{name, model, instructions, reads, writes, output, tools, price}]``:
    an LLM agent as a suggestor (``converge.agents``, extra ``agents``).

    ``model`` is a pydantic-ai model string (``openai:gpt-4o-mini``; ``test`` runs
    pydantic-ai's offline TestModel) and defaults to ``$CONVERGE_MODEL``; with no
    model at all the job fails, unless ``if_no_model: skip`` leaves the agent out.
    ``output`` is ``module:Model`` (default: text); ``tools`` are ``module:function``
    references; ``price`` is ``[usd_per_million_input, usd_per_million_output]``;
    ``prompt`` is a template over ``{facts}``; ``per`` a content field: one agent
    run per group of facts sharing it (see ``converge.agents.agent_suggestor``).
    ``base_url`` (default ``$CONVERGE_MODEL_BASE_URL``) points ``openai:NAME`` at an
    OpenAI-compatible server's chat completions; ``model_settings`` is what each
    request carries (:class:`ModelSettingsSpec`).
    """

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, description="The suggestor name of the agent (unique).")
    model: str | None = Field(
        default=None,
        description="A pydantic-ai model string (`openai:gpt-4o-mini`; `test`: the offline "
        "TestModel); default `$CONVERGE_MODEL`.",
    )
    base_url: str | None = Field(
        default=None,
        min_length=1,
        description="An OpenAI-compatible server (`http://127.0.0.1:8080/v1`) that an "
        "`openai:NAME` model reaches through chat completions, no API key needed; default "
        "`$CONVERGE_MODEL_BASE_URL`.",
    )
    model_settings: ModelSettingsSpec | None = Field(
        default=None,
        description="What each model request carries (`max_tokens`, `temperature`, "
        "`tool_choice`, `extra_body`...; the `agents[].model_settings` table).",
    )
    instructions: str = Field(default="", description="The agent's instructions (system prompt).")
    reads: list[str] = Field(
        min_length=1, description="Context keys it depends on; its prompt lists their facts."
    )
    writes: str = Field(min_length=1, description="The key of its proposals, one per output item.")
    output: str | None = Field(
        default=None,
        description="A reference to a pydantic model of its output (not called); default: text.",
    )
    tools: list[str] = Field(
        default_factory=list,
        description="References to plain functions it may call; each call is an invocation "
        "`NAME.TOOL`.",
    )
    price: tuple[float, float] | None = Field(
        default=None,
        description="`[usd_per_million_input, usd_per_million_output]`, instead of genai-prices.",
    )
    prompt: str | None = Field(
        default=None, description="A prompt template; `{facts}` is replaced by the facts read."
    )
    per: str | None = Field(
        default=None,
        description="A content field: one agent run per group of facts sharing its value.",
    )
    if_no_model: Literal["error", "skip"] = Field(
        default="error",
        description="With no model and no `$CONVERGE_MODEL`: fail the job, or leave the agent out.",
    )

    @model_validator(mode="after")
    def _price_not_negative(self) -> AgentSpec:
        if self.price is not None and min(self.price) < 0:
            raise ValueError("price must be [usd_per_million_input, usd_per_million_output] >= 0")
        return self


MODEL_ENV = "CONVERGE_MODEL"
"""The environment variable an agent's ``model`` defaults to."""


class CelerySpec(BaseModel):
    """``executor: {celery: {broker, backend, queue, ship}}``: run the job's
    suggestors on Celery workers (extra ``workers``; see docs/scale-out.md).
    ``broker`` and ``backend`` are URLs, or ``$NAME`` to read one from the
    environment (keeps credentials out of the job recorded with each run)."""

    model_config = ConfigDict(extra="forbid")

    broker: str = Field(
        min_length=1, description="The broker URL (RabbitMQ `amqp://`, Redis), or `$NAME`."
    )
    backend: str = Field(min_length=1, description="The result backend URL (Redis), or `$NAME`.")
    queue: str = Field(
        default="converge", min_length=1, description="The Celery queue the workers consume."
    )
    ship: Literal["backend", "context", "dependencies"] = Field(
        default="backend",
        description=(
            "How the context reaches workers: `backend` (new facts through the result backend), "
            "`context` (in every task) or `dependencies` (only the keys read)."
        ),
    )


class ExecutorSpec(BaseModel):
    """Where the job's suggestors execute; absent = in-process."""

    model_config = ConfigDict(extra="forbid")

    celery: CelerySpec = Field(
        description=(
            "Run the suggestors on Celery workers (the `executor.celery` table, docs/scale-out.md)."
        )
    )


VISIBLE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,99}$")
"""A person's or group's name in ``visible_to`` (as tokens and groups name them)."""


class JobSpec(BaseModel):
    """The parsed job file (see the module docstring for the format)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        min_length=1, description="The job's name (recorded with each run; `converge runs --job`)."
    )
    description: str = Field(default="", description="One sentence on what the job does.")
    suggestors: list[str] = Field(
        min_length=1,
        description=(
            "`module:attribute` references: a suggestor, a list of them, or a class / factory "
            "called with no arguments."
        ),
    )
    agents: list[AgentSpec] = Field(
        default_factory=list,
        description="LLM agents as suggestors (the `agents[]` table; extra `agents`, "
        "`docs/agents.md`).",
    )
    nondeterministic: list[str] = Field(
        default_factory=list,
        description="Names of suggestors or agents whose output the context does not "
        "determine (a clock, a network call): their proposals are recorded, and "
        "`converge replay` re-uses them instead of executing them.",
    )
    budget: Budget = Field(
        default_factory=Budget, description="Limits of a run (the `budget` table below)."
    )
    criteria: list[str] = Field(
        default_factory=list,
        description=(
            "References to criteria (`id`, `required`, `evaluate(ctx)`): the job is done when "
            "every required one is met."
        ),
    )
    invariants: list[str] = Field(
        default_factory=list,
        description=(
            "References to invariants (`name`, `invariant_class`, `check(ctx)`): rules that must "
            "never break."
        ),
    )
    gates: list[GateSpec] = Field(
        default_factory=list,
        description="Promotion and human-in-the-loop gates (the `gates[]` tables).",
    )
    stop_conditions: list[dict[str, Any]] = Field(
        default_factory=list,
        description=(
            "Stop conditions, each `{type: ..., ...}`: every type is in `docs/stop-conditions.md`."
        ),
    )
    initial: dict[str, list[Any]] = Field(
        default_factory=dict,
        description="Input facts: `{key: [content, ...]}`, promoted before cycle 1.",
    )
    on_error: Literal["stop", "continue"] = Field(
        default="stop",
        description=(
            "`stop`: a failing suggestor stops the run (`Error`); `continue`: it is recorded and "
            "the run goes on."
        ),
    )
    max_concurrency: int = Field(
        default=64, ge=1, description="Suggestors run at once in the async driver (at least 1)."
    )
    executor: ExecutorSpec | None = Field(
        default=None,
        description=(
            "Where the suggestors execute: absent = in-process; `{celery: {...}}` on Celery "
            "workers (the `executor.celery` table below, docs/scale-out.md)."
        ),
    )
    visible_to: list[str] | None = Field(
        default=None,
        description=(
            "People and groups who may see this job's runs (their facts, events, gates and "
            "streams) in the inbox and with `--token` on the command line; absent: everyone "
            "with access. Admins see every run; a gate's approvers must be among them "
            "(docs/access.md)."
        ),
    )
    report: list[ReportSpec] = Field(
        default_factory=list,
        description=(
            "Tables `converge run` prints after its summary and `converge report` renders (the "
            "`report[]` table)."
        ),
    )

    @field_validator("visible_to")
    @classmethod
    def _visible_to_names(cls, value: list[str] | None) -> list[str] | None:
        # people and groups, as `converge user add NAME --group GROUP` names them
        for i, name in enumerate(value or []):
            if not VISIBLE_NAME.match(name):
                raise ValueError(
                    f"visible_to[{i}] {name!r} is not a person or group name (letters, digits "
                    "and . _ @ -, starting with a letter or digit, at most 100)"
                )
        return value

    @field_validator("initial")
    @classmethod
    def _initial_is_json(cls, value: dict[str, list[Any]]) -> dict[str, list[Any]]:
        # initial facts are recorded and hashed: they must be canonical JSON
        for key, contents in value.items():
            for i, content in enumerate(contents):
                try:
                    content_key(content)
                except (TypeError, ValueError) as exc:
                    raise ValueError(f"initial[{key!r}][{i}] is not JSON: {exc}") from None
        return value
