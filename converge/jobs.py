"""Job files: a run described in YAML, validated by pydantic.

::

    name: dependency-audit
    suggestors: [examples.dependency_audit:inventory, examples.dependency_audit:licenses]
    budget: {max_cycles: 20, max_seconds: 120}
    criteria: [examples.dependency_audit:all_classified]
    invariants: [examples.dependency_audit:no_forbidden_license]
    gates: [{hitl: {keys: [license.unknown], summary: "Classify {content[name]}"}}]
    stop_conditions: [{type: loop_detection, window: 4}]
    initial: {scope: [converge]}
    report: [{key: license, columns: [name, spdx, source], title: Licenses}]
    agents: [{name: reviewer, model: test, reads: [license.file], writes: license}]
    executor: {celery: {broker: "amqp://guest:guest@host:5672//", backend: "redis://host:6379/0"}}

References are ``module:attribute``; the attribute may be an object, a list of
objects, or a class / factory called with no arguments. Every error is a
:class:`JobFileError` naming the file, the line and the field.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from converge.reports import ReportSpec
from engine import (
    Budget,
    ConfigurationError,
    Criterion,
    Engine,
    ImportReferenceError,
    Invariant,
    JobFileError,
    OnStop,
    RunStore,
    content_key,
)
from engine.references import resolve_reference
from gates.hitl import DEFAULT_SUMMARY, require_approval
from gates.policies import apply_stop_conditions
from gates.promotion import ContentSchema, MinConfidence


class HitlSpec(BaseModel):
    """``gates: [{hitl: {...}}]``: a ``gates.hitl.require_approval`` policy."""

    model_config = ConfigDict(extra="forbid")

    keys: list[str] | None = None
    suggestors: list[str] | None = None
    confidence_at_most: float | None = Field(default=None, ge=0, le=1)
    when: str | None = None
    summary: str | None = None
    timeout_s: float | None = Field(default=None, gt=0)
    on_timeout: Literal["approve", "reject"] = "reject"
    name: str | None = None
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


class SchemaSpec(BaseModel):
    """``gates: [{schema: {key: K, model: module:Model}}]``: content schema per key."""

    model_config = ConfigDict(extra="forbid")

    key: str
    model: str
    on_reject: Literal["stop", "drop"] = "stop"


class MinConfidenceSpec(BaseModel):
    """``gates: [{min_confidence: {threshold: 0.5}}]``."""

    model_config = ConfigDict(extra="forbid")

    threshold: float = Field(ge=0, le=1)
    keys: list[str] | None = None
    on_reject: Literal["stop", "drop"] = "drop"


class GateSpec(BaseModel):
    """One entry of ``gates:``: exactly one of ``hitl``, ``schema``,
    ``min_confidence`` or ``promotion`` (a reference to a PromotionGate)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    hitl: HitlSpec | None = None
    schema_: SchemaSpec | None = Field(default=None, alias="schema")
    min_confidence: MinConfidenceSpec | None = None
    promotion: str | None = None

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
    """

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, description="The suggestor name of the agent (unique).")
    model: str | None = Field(
        default=None,
        description="A pydantic-ai model string (`openai:gpt-4o-mini`; `test`: the offline "
        "TestModel); default `$CONVERGE_MODEL`.",
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

    broker: str = Field(min_length=1)
    backend: str = Field(min_length=1)
    queue: str = Field(default="converge", min_length=1)
    ship: Literal["backend", "context", "dependencies"] = "backend"


class ExecutorSpec(BaseModel):
    """Where the job's suggestors execute; absent = in-process."""

    model_config = ConfigDict(extra="forbid")

    celery: CelerySpec


class JobSpec(BaseModel):
    """The parsed job file (see the module docstring for the format)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    description: str = ""
    suggestors: list[str] = Field(min_length=1)
    agents: list[AgentSpec] = Field(
        default_factory=list,
        description="LLM agents as suggestors (the `agents[]` table; extra `agents`, "
        "`docs/agents.md`).",
    )
    budget: Budget = Field(default_factory=Budget)
    criteria: list[str] = Field(default_factory=list)
    invariants: list[str] = Field(default_factory=list)
    gates: list[GateSpec] = Field(default_factory=list)
    stop_conditions: list[dict[str, Any]] = Field(default_factory=list)
    initial: dict[str, list[Any]] = Field(default_factory=dict)
    on_error: Literal["stop", "continue"] = "stop"
    max_concurrency: int = Field(default=64, ge=1)
    executor: ExecutorSpec | None = None
    report: list[ReportSpec] = Field(default_factory=list)

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


@dataclass
class Job:
    """A loaded job: its spec, where it came from, and its raw data (recorded with runs)."""

    spec: JobSpec
    path: str
    raw: dict[str, Any]
    lines: dict[tuple[str | int, ...], int]

    @property
    def name(self) -> str:
        """The job's name."""
        return self.spec.name

    def record(self) -> dict[str, Any]:
        """What a store keeps so another process can rebuild this job's engine."""
        return {"path": os.path.abspath(self.path) if self.path else "", "spec": self.raw}

    def build_engine(
        self,
        store: RunStore | None = None,
        *,
        on_stop: OnStop | None = None,
        progress: Callable[[int, float], None] | None = None,
    ) -> Engine:
        """An engine with the job's suggestors, budget, criteria, invariants, gates
        and stop conditions. Raises :class:`JobFileError` for a bad reference."""
        spec = self.spec
        budget = spec.budget
        policies: list[Any] = []
        if spec.stop_conditions:
            budget, policies = self._stop_conditions(budget)
        suggestors: list[Any] = []
        references: dict[str, str] = {}
        for i, ref in enumerate(spec.suggestors):
            obj = self._ref(ref, ("suggestors", i), many=True)
            found = obj if isinstance(obj, list | tuple) else [obj]
            suggestors.extend(found)
            for s in found:
                references.setdefault(str(getattr(s, "name", "")), ref)
        engine = Engine(
            budget=budget,
            criteria=self._typed_refs(
                "criteria", Criterion, "a criterion (id, required, evaluate)"
            ),
            invariants=self._typed_refs(
                "invariants", Invariant, "an invariant (name, invariant_class, check)"
            ),
            gates=self._gates(),
            stop_policies=policies,
            store=store,
            on_error=spec.on_error,
            on_stop=on_stop,
            max_concurrency=spec.max_concurrency,
            job_name=spec.name,
            job_spec=self.record(),
            progress=progress,
            executor=self._executor(references),
        )
        if spec.agents:
            suggestors.extend(self._agents())
        try:
            engine.register(*suggestors)
        except ConfigurationError as exc:
            raise self._error(str(exc), ("suggestors",)) from exc
        return engine

    # -- helpers ---------------------------------------------------------------------
    def _executor(self, references: dict[str, str]) -> Any:
        """The job's ``executor:`` (None = in-process); the Celery extra is imported
        only when a job asks for it."""
        if self.spec.executor is None:
            return None
        c = self.spec.executor.celery
        try:
            from converge.workers import CeleryExecutor
        except ImportError as exc:
            raise self._error(str(exc), ("executor", "celery")) from exc
        broker = self._from_env(c.broker, ("executor", "celery", "broker"))
        backend = self._from_env(c.backend, ("executor", "celery", "backend"))
        return CeleryExecutor(broker, backend, queue=c.queue, references=references, ship=c.ship)

    def _from_env(self, value: str, loc: tuple[str | int, ...]) -> str:
        """``$NAME`` / ``${NAME}`` → the environment variable (so that credentials in
        a URL stay out of the job file and of the job recorded with each run)."""
        m = re.fullmatch(r"\$\{?(\w+)\}?", value)
        if m is None:
            return value
        found = os.environ.get(m.group(1))
        if not found:
            raise self._error(f"environment variable {m.group(1)} is not set", loc)
        return found

    def _stop_conditions(self, budget: Budget) -> tuple[Budget, list[Any]]:
        try:
            new_budget, policies = apply_stop_conditions(budget, self.spec.stop_conditions)
            return new_budget, list(policies)
        except ValidationError as exc:
            raise _from_validation(exc, self.path, self.lines, prefix=("stop_conditions",)) from exc
        except (ConfigurationError, ValueError, TypeError) as exc:
            raise self._error(str(exc), ("stop_conditions",)) from exc

    def _gates(self) -> list[Any]:
        out: list[Any] = []
        for i, g in enumerate(self.spec.gates):
            if g.hitl is not None:
                h = g.hitl
                when = self._ref(h.when, ("gates", i, "hitl", "when")) if h.when else None
                check = (
                    self._ref(h.validate_value, ("gates", i, "hitl", "validate_value"), call=False)
                    if h.validate_value
                    else None
                )
                out.append(
                    require_approval(
                        keys=h.keys,
                        suggestors=h.suggestors,
                        confidence_at_most=h.confidence_at_most,
                        when=when,
                        summary=h.summary or DEFAULT_SUMMARY,
                        timeout_s=h.timeout_s,
                        on_timeout=h.on_timeout,
                        name=h.name,
                        approvals_required=h.approvals_required,
                        validate_value=check,
                    )
                )
            elif g.schema_ is not None:
                model = self._ref(g.schema_.model, ("gates", i, "schema", "model"), call=False)
                try:
                    gate = ContentSchema(g.schema_.key, model, on_reject=g.schema_.on_reject)
                except ConfigurationError as exc:
                    raise self._error(str(exc), ("gates", i, "schema", "model")) from exc
                out.append(gate)
            elif g.min_confidence is not None:
                m = g.min_confidence
                out.append(MinConfidence(m.threshold, m.keys, on_reject=m.on_reject))
            elif g.promotion is not None:
                out.append(self._ref(g.promotion, ("gates", i, "promotion")))
        return out

    def _agents(self) -> list[Any]:
        """The ``agents:`` entries as suggestors (imports the ``agents`` extra only now)."""
        try:
            from converge.agents import build_agent
        except ConfigurationError as exc:
            raise self._error(str(exc), ("agents",)) from exc
        out: list[Any] = []
        for i, a in enumerate(self.spec.agents):
            model = a.model or os.environ.get(MODEL_ENV, "").strip() or None
            if model is None:
                if a.if_no_model == "skip":
                    continue
                raise self._error(f"no model: give model or set ${MODEL_ENV}", ("agents", i))
            output = self._ref(a.output, ("agents", i, "output"), call=False) if a.output else str
            tools = [
                self._ref(t, ("agents", i, "tools", j), call=False) for j, t in enumerate(a.tools)
            ]
            try:
                out.append(
                    build_agent(
                        name=a.name,
                        model=model,
                        instructions=a.instructions,
                        reads=a.reads,
                        writes=a.writes,
                        output=output,
                        tools=tools,
                        price=a.price,
                        prompt=a.prompt,
                        per=a.per,
                    )
                )
            except ConfigurationError as exc:
                raise self._error(str(exc), ("agents", i, "model")) from exc
        return out

    def _typed_refs(self, field: str, kind: type, what: str) -> list[Any]:
        """The objects of ``criteria:`` or ``invariants:``, each checked to be ``kind``."""
        out: list[Any] = []
        for i, ref in enumerate(getattr(self.spec, field)):
            obj = self._ref(ref, (field, i))
            if not isinstance(obj, kind):
                raise self._error(f"{ref} is {type(obj).__name__}, not {what}", (field, i))
            out.append(obj)
        return out

    def _ref(
        self, ref: str, loc: tuple[str | int, ...], *, many: bool = False, call: bool = True
    ) -> Any:
        add_import_root(self.path)
        try:
            return resolve_reference(ref, call=call)
        except ImportReferenceError as exc:
            raise self._error(str(exc), loc) from exc

    def _error(self, message: str, loc: tuple[str | int, ...]) -> JobFileError:
        field = ".".join(str(p) for p in loc)
        return JobFileError(f"{field}: {message}", path=self.path, line=_line(self.lines, loc))


def import_root(job_path: str) -> Path | None:
    """The directory a job file's ``module:attribute`` references import from, besides
    the current directory: the job file's directory, or, when that is a package
    (it holds an ``__init__.py``), the first ancestor that is not one — so that
    ``examples/dependency_audit/job.yaml`` finds ``examples.dependency_audit``.
    None for a job that is not a file."""
    if not job_path or job_path.startswith("<"):
        return None
    directory = Path(job_path).absolute().parent
    while (directory / "__init__.py").is_file() and directory.parent != directory:
        directory = directory.parent
    return directory


def add_import_root(job_path: str) -> None:
    """Put :func:`import_root` on ``sys.path`` (after the entries already there)."""
    root = import_root(job_path)
    if root is not None and str(root) not in sys.path:
        sys.path.append(str(root))


MAX_NODES = 50_000
"""Most YAML nodes a job file may hold once its aliases are expanded (alias bombs)."""

MAX_DEPTH = 64
"""Deepest nesting of a job file."""


def load_job(path: str | os.PathLike[str]) -> Job:
    """Read and validate a job file. Raises :class:`JobFileError` (file, line, field)."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise JobFileError(f"cannot read job file: {exc.strerror or exc}", path=str(p)) from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise JobFileError(
            f"not UTF-8 text: byte 0x{raw[exc.start]:02X} cannot be decoded", path=str(p), line=line
        ) from None
    return parse_job(text, str(p))


def parse_job(text: str, path: str = "<job>") -> Job:
    """Validate job text (YAML). Raises :class:`JobFileError` (file, line, field).

    Hostile input is refused with one line, not a traceback: YAML errors, nesting
    deeper than :data:`MAX_DEPTH`, more than :data:`MAX_NODES` nodes once aliases
    are expanded ("billion laughs"), values YAML cannot construct.
    """
    node = _compose(text, path)
    if node is not None:
        _check_size(node, path)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, path) from None
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:
        # e.g. a timestamp with month 13: PyYAML's constructor raises plain errors
        raise JobFileError(f"invalid YAML value: {exc}", path=path) from None
    if not isinstance(data, dict):
        raise JobFileError(
            "a job file must be a mapping (name, suggestors, ...)", path=path, line=1
        )
    lines: dict[tuple[str | int, ...], int] = {}
    if node is not None:
        _index_lines(node, (), lines)
    try:
        spec = JobSpec.model_validate(data)
    except ValidationError as exc:
        raise _from_validation(exc, path, lines) from exc
    return Job(spec, path, data, lines)


def _compose(text: str, path: str) -> yaml.Node | None:
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, path) from None
    except RecursionError:
        message = f"nested deeper than {MAX_DEPTH} levels"
        raise JobFileError(message, path=path, line=_deep_line(text)) from None


def _deep_line(text: str) -> int | None:
    """The line where flow brackets first nest deeper than :data:`MAX_DEPTH`."""
    depth = 0
    for number, line in enumerate(text.splitlines(), 1):
        for ch in line:
            depth += ch in "[{"
            depth -= ch in "]}"
            if depth > MAX_DEPTH:
                return number
    return None


def _yaml_error(exc: yaml.YAMLError, path: str) -> JobFileError:
    """PyYAML's error (often two lines: context and problem) as one line."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    line = mark.line + 1 if mark is not None else None
    problem = getattr(exc, "problem", None)
    context = getattr(exc, "context", None)
    message = str(exc)
    if problem:
        message = f"{problem} ({context})" if context else str(problem)
    return JobFileError(f"invalid YAML: {' '.join(message.split())}", path=path, line=line)


def _check_size(root: yaml.Node, path: str) -> None:
    """Refuse documents too deep, or too large once aliases are expanded.

    Sizes are memoised per node, so a shared (aliased) node is measured once: the
    check costs the document's size, not its expansion's.
    """
    size: dict[int, int] = {}
    stack: list[tuple[yaml.Node, int, bool]] = [(root, 1, False)]
    while stack:
        node, depth, children_done = stack.pop()
        if id(node) in size:
            continue
        if depth > MAX_DEPTH:
            line = node.start_mark.line + 1
            raise JobFileError(f"nested deeper than {MAX_DEPTH} levels", path=path, line=line)
        children = _children(node)
        if children_done:
            total = 1 + sum(size[id(c)] for c in children)
            if total > MAX_NODES:
                raise JobFileError(
                    f"more than {MAX_NODES} values once its aliases are expanded (an alias bomb?)",
                    path=path,
                    line=node.start_mark.line + 1,
                )
            size[id(node)] = total
            continue
        stack.append((node, depth, True))
        stack.extend((c, depth + 1, False) for c in children if id(c) not in size)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def job_from_record(record: dict[str, Any]) -> Job:
    """Rebuild a job from :meth:`Job.record` (as stored with a run)."""
    raw = record.get("spec")
    if not isinstance(raw, dict):
        raise ConfigurationError("the run recorded no job spec")
    path = str(record.get("path") or "<recorded job>")
    try:
        spec = JobSpec.model_validate(raw)
    except ValidationError as exc:
        raise _from_validation(exc, path, {}) from exc
    return Job(spec, path, raw, {})


def _index_lines(
    node: yaml.Node, loc: tuple[str | int, ...], out: dict[tuple[str | int, ...], int]
) -> None:
    out[loc] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            key = k.value
            out[(*loc, key)] = k.start_mark.line + 1
            _index_lines(v, (*loc, key), out)
            out[(*loc, key)] = k.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, v in enumerate(node.value):
            _index_lines(v, (*loc, i), out)


def _line(lines: dict[tuple[str | int, ...], int], loc: tuple[str | int, ...]) -> int | None:
    for n in range(len(loc), -1, -1):
        line = lines.get(tuple(loc[:n]))
        if line is not None:
            return line
    return None


def _from_validation(
    exc: ValidationError,
    path: str,
    lines: dict[tuple[str | int, ...], int],
    prefix: tuple[str | int, ...] = (),
) -> JobFileError:
    err = exc.errors()[0]
    loc = (*prefix, *(p for p in err["loc"] if not (isinstance(p, str) and "[" in p)))
    loc = tuple("schema" if p == "schema_" else p for p in loc)
    field = ".".join(str(p) for p in loc) or "(top level)"
    more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return JobFileError(f"{field}: {err['msg']}{more}", path=path, line=_line(lines, loc))
