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
    executor: {celery: {broker: "amqp://guest:guest@host:5672//", backend: "redis://host:6379/0"}}

References are ``module:attribute``; the attribute may be an object, a list of
objects, or a class / factory called with no arguments. Every error is a
:class:`JobFileError` naming the file, the line and the field.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from engine import (
    Budget,
    ConfigurationError,
    Engine,
    ImportReferenceError,
    JobFileError,
    OnStop,
    RunStore,
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
    budget: Budget = Field(default_factory=Budget)
    criteria: list[str] = Field(default_factory=list)
    invariants: list[str] = Field(default_factory=list)
    gates: list[GateSpec] = Field(default_factory=list)
    stop_conditions: list[dict[str, Any]] = Field(default_factory=list)
    initial: dict[str, list[Any]] = Field(default_factory=dict)
    on_error: Literal["stop", "continue"] = "stop"
    max_concurrency: int = Field(default=64, ge=1)
    executor: ExecutorSpec | None = None


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
            criteria=[self._ref(r, ("criteria", i)) for i, r in enumerate(spec.criteria)],
            invariants=[self._ref(r, ("invariants", i)) for i, r in enumerate(spec.invariants)],
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
                    )
                )
            elif g.schema_ is not None:
                model = self._ref(g.schema_.model, ("gates", i, "schema", "model"), call=False)
                out.append(ContentSchema(g.schema_.key, model, on_reject=g.schema_.on_reject))
            elif g.min_confidence is not None:
                m = g.min_confidence
                out.append(MinConfidence(m.threshold, m.keys, on_reject=m.on_reject))
            elif g.promotion is not None:
                out.append(self._ref(g.promotion, ("gates", i, "promotion")))
        return out

    def _ref(
        self, ref: str, loc: tuple[str | int, ...], *, many: bool = False, call: bool = True
    ) -> Any:
        try:
            return resolve_reference(ref, call=call)
        except ImportReferenceError as exc:
            raise self._error(str(exc), loc) from exc

    def _error(self, message: str, loc: tuple[str | int, ...]) -> JobFileError:
        field = ".".join(str(p) for p in loc)
        return JobFileError(f"{field}: {message}", path=self.path, line=_line(self.lines, loc))


def load_job(path: str | os.PathLike[str]) -> Job:
    """Read and validate a job file. Raises :class:`JobFileError` (file, line, field)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise JobFileError(f"cannot read job file: {exc.strerror or exc}", path=str(p)) from exc
    return parse_job(text, str(p))


def parse_job(text: str, path: str = "<job>") -> Job:
    """Validate job text (YAML). Raises :class:`JobFileError` (file, line, field)."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise JobFileError(f"invalid YAML: {problem}", path=path, line=line) from exc
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
