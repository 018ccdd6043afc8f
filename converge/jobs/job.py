"""A loaded job file: :class:`Job`, which builds the engine its spec describes.

The spec's ``module:attribute`` references are imported when the engine is
built, each error a :class:`JobFileError` naming the file, the line and the
field; the ``agents`` and ``workers`` extras are imported only when the job uses
them.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from converge.errors import JobFileError
from converge.jobs.errors import validation_error
from converge.jobs.models import AgentModel, ModelChoice, agent_models, models_record
from converge.jobs.references import resolve_job_reference
from converge.jobs.source import line_at
from converge.jobs.spec import MODEL_ENV, JobSpec
from engine import (
    Budget,
    ConfigurationError,
    Criterion,
    Engine,
    ImportReferenceError,
    Invariant,
    OnStop,
    RunStore,
)
from gates.hitl import DEFAULT_SUMMARY, require_approval
from gates.policies import apply_stop_conditions
from gates.promotion import ContentSchema, MinConfidence
from gates.stop_specs import StopConditionSpec

__all__ = ["REFERENCE_LISTS", "Job", "raw_reference_problems", "reference_problem"]


@dataclass
class Job:
    """A loaded job: its spec, where it came from, and its raw data (recorded with
    runs); rebuilt from a run's record, the models its agents were recorded with
    (``recorded_models``) and what the command asks of them (``model_choice``:
    :mod:`converge.jobs.models`)."""

    spec: JobSpec
    path: str
    raw: dict[str, Any]
    lines: dict[tuple[str | int, ...], int]
    recorded_models: dict[str, AgentModel] | None = None
    model_choice: ModelChoice = dataclasses.field(default_factory=ModelChoice)

    @property
    def name(self) -> str:
        """The job's name."""
        return self.spec.name

    def record(self, models: dict[str, AgentModel] | None = None) -> dict[str, Any]:
        """What a store keeps so another process can rebuild this job's engine: its
        path, its spec and, with agents, the model of each (``models``, default
        :meth:`agent_models`)."""
        out: dict[str, Any] = {
            "path": os.path.abspath(self.path) if self.path else "",
            "spec": self.raw,
        }
        if self.spec.agents:
            out["models"] = models_record(self.agent_models() if models is None else models)
        return out

    def agent_models(self) -> dict[str, AgentModel]:
        """The model and base URL of each agent (:func:`converge.jobs.models.agent_models`
        over this process's environment). Raises :class:`~converge.errors.ModelChanged`."""
        return agent_models(self.spec, self.recorded_models, self.model_choice)

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
        models = self.agent_models() if spec.agents else {}
        budget = spec.budget
        policies: list[Any] = []
        if spec.stop_conditions:
            budget, policies = self._stop_conditions(budget)
        suggestors: list[Any] = []
        references: dict[str, str] = {}
        for i, ref in enumerate(spec.suggestors):
            obj = self._ref(ref, ("suggestors", i))
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
            job_spec=self.record(models),
            progress=progress,
            executor=self._executor(references),
        )
        if spec.agents:
            suggestors.extend(self._agents(models))
        try:
            engine.register(*suggestors)
        except ConfigurationError as exc:
            raise self._error(str(exc), ("suggestors",)) from exc
        for i, name in enumerate(spec.nondeterministic):
            if name not in engine.registry.index and not _skipped(models, name):
                close = difflib.get_close_matches(name, engine.registry.names, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise self._error(
                    f"no suggestor or agent {name!r} in this job{hint}", ("nondeterministic", i)
                )
        engine.registry.mark_nondeterministic(
            n for n in spec.nondeterministic if n in engine.registry.index
        )
        return engine

    def resolve(self, ref: str, *, call: bool = True) -> Any:
        """Import one of this job's ``module:attribute`` references as its run does:
        from the job file's directory first (see
        :func:`converge.jobs.references.resolve_job_reference`), whichever the
        current directory. Raises :class:`ImportReferenceError`."""
        return resolve_job_reference(ref, self.path, call=call)

    def check_references(self) -> None:
        """Import the modules of the job's ``suggestors``, ``criteria`` and
        ``invariants`` references and find their attributes (nothing called), so a
        reference that names nothing is refused before any store is opened.
        Raises :class:`JobFileError` holding every bad reference (field, line, "did
        you mean"), the gates' too; the ``stop_conditions``' errors come first, as
        :meth:`build_engine` checks them first."""
        problems: list[JobFileError] = []
        if self.spec.stop_conditions:
            try:
                self._stop_conditions(self.spec.budget)
            except JobFileError as exc:
                problems.append(exc)
        refs: list[tuple[str, tuple[str | int, ...]]] = [
            (ref, (field, i))
            for field in REFERENCE_LISTS
            for i, ref in enumerate(getattr(self.spec, field))
        ]
        for i, g in enumerate(self.spec.gates):
            if g.hitl is not None:
                hooks = (("when", g.hitl.when), ("validate_value", g.hitl.validate_value))
                refs += [(r, ("gates", i, "hitl", name)) for name, r in hooks if r]
            elif g.schema_ is not None:
                refs.append((g.schema_.model, ("gates", i, "schema", "model")))
            elif g.promotion is not None:
                refs.append((g.promotion, ("gates", i, "promotion")))
        found = [reference_problem(ref, loc, self.path, self.lines) for ref, loc in refs]
        problems += merged([p for p in found if p is not None])
        if problems:
            raise JobFileError.of(problems)

    # -- helpers ---------------------------------------------------------------------
    def _executor(self, references: dict[str, str]) -> Any:
        """The job's ``executor:`` (None = in-process); the Celery extra is imported
        only when a job asks for it."""
        if self.spec.executor is None:
            return None
        c = self.spec.executor.celery
        try:
            from converge.workers.executor import CeleryExecutor
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
            raise validation_error(
                exc,
                self.path,
                self.lines,
                prefix=("stop_conditions",),
                schema=list[StopConditionSpec],
            ) from exc
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
                        approvers=h.approvers,
                        four_eyes=h.four_eyes,
                        reason_required=h.reason_required,
                        escalate_after_s=h.escalate_after_s,
                        escalate_to=h.escalate_to,
                        notify=h.notify,
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

    def _agents(self, models: dict[str, AgentModel]) -> list[Any]:
        """The ``agents:`` entries as suggestors on ``models`` (imports the ``agents``
        extra only now)."""
        try:
            from converge.agents import build_agent
        except ConfigurationError as exc:
            raise self._error(str(exc), ("agents",)) from exc
        out: list[Any] = []
        for i, a in enumerate(self.spec.agents):
            model, base_url = models[a.name].model, models[a.name].base_url
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
                        base_url=base_url,
                        model_settings=a.model_settings.settings() if a.model_settings else None,
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

    def _ref(self, ref: str, loc: tuple[str | int, ...], *, call: bool = True) -> Any:
        try:
            return self.resolve(ref, call=call)
        except ImportReferenceError as exc:
            raise self._error(str(exc), loc) from exc

    def _error(self, message: str, loc: tuple[str | int, ...]) -> JobFileError:
        field = ".".join(str(p) for p in loc)
        return JobFileError(f"{field}: {message}", path=self.path, line=line_at(self.lines, loc))


REFERENCE_LISTS = ("suggestors", "criteria", "invariants")
"""The fields of a job file that are lists of ``module:attribute`` references."""


def reference_problem(
    ref: str, loc: tuple[str | int, ...], path: str, lines: dict[tuple[str | int, ...], int]
) -> JobFileError | None:
    """The error of the job file ``path``'s reference ``ref`` at ``loc`` when it names
    nothing (imported as its run does, nothing called), else None."""
    try:
        resolve_job_reference(ref, path, call=False)
    except ImportReferenceError as exc:
        field = ".".join(str(p) for p in loc)
        return JobFileError(f"{field}: {exc}", path=path, line=line_at(lines, loc))
    return None


def merged(problems: list[JobFileError]) -> list[JobFileError]:
    """``problems`` of references with one cause said once: those whose message is
    the same but for its field (a module that does not import, named by every
    reference to it) become one, at the first one's line, naming every field."""
    groups: dict[tuple[str, str], list[tuple[str, JobFileError]]] = {}
    for p in problems:
        field, _, message = p.detail.partition(": ")
        groups.setdefault((p.path, message), []).append((field, p))
    out = []
    for (path, message), found in groups.items():
        first = found[0][1]
        fields = ", ".join(field for field, _ in found)
        out.append(
            first
            if len(found) == 1
            else JobFileError(f"{fields}: {message}", path=path, line=first.line)
        )
    return out


def raw_reference_problems(
    data: dict[str, Any], path: str, lines: dict[tuple[str | int, ...], int], skip: set[str]
) -> list[JobFileError]:
    """The bad references of a job file's raw ``data`` whose spec did not validate:
    those of its reference lists (not in ``skip``: already reported) that are lists
    of text, so a file's errors are all reported at once."""
    found: list[JobFileError] = []
    for field in REFERENCE_LISTS:
        refs = data.get(field)
        if field in skip or not isinstance(refs, list):
            continue
        for i, ref in enumerate(refs):
            problem = (
                reference_problem(ref, (field, i), path, lines) if isinstance(ref, str) else None
            )
            if problem is not None:
                found.append(problem)
    return found


def _skipped(models: dict[str, AgentModel], name: str) -> bool:
    """Whether ``name`` is an agent left out for want of a model (``if_no_model: skip``)."""
    return name in models and models[name].model is None
