"""Re-executing a recorded run and comparing it with its recording: :func:`replay_run`.

The replay runs the job (the one the run recorded, or another) from the run's
recorded initial facts, budget and run id, in process (an ``executor:`` is not
used), against a **scratch store**: a SQLite file in a temporary directory,
deleted afterwards. The recorded store is only read. Offline (the default):

- the LLM agents' model requests are answered from the responses the run
  recorded (:mod:`converge.agents.tape`): no model is called, the agents' own
  code (prompt, tools, output handling) runs;
- the suggestors marked non-deterministic are played back from their recorded
  outputs (:class:`~converge.timetravel._recorded.RecordedSuggestor`);
- every other suggestor runs its code.

The run goes on as it went on after each stop: a gate decided as recorded (who,
approve or reject, reason, value), a resume with the budget recorded. Then the
scratch store's events are compared with the recording's
(:func:`~converge.timetravel._compare.compare`). ``live=True`` substitutes nothing:
models are called, non-deterministic suggestors run, and the differences are
reported the same way.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from audit import SqlRunStore, open_store
from converge.errors import ReplayError
from converge.jobs import Job, job_from_record, load_job
from converge.jobs.models import ModelChoice, models_from_record
from converge.timetravel._compare import Divergence, comparable_stop, compare, redacted_facts
from converge.timetravel._recorded import RecordedSuggestor
from converge.timetravel._recording import Recording, read_recording
from converge.timetravel._report import ReplayReport
from engine import (
    Budget,
    ConvergeError,
    Engine,
    GateDecision,
    GateStatus,
    HitlGatePending,
    RunResult,
    RunStore,
)
from engine.registry import SuggestorRegistry

__all__ = ["EngineFactory", "replay_run"]

EngineFactory = Callable[[RunStore], Engine]
"""Builds the engine to replay with, on the store it is given (the scratch store)."""


def replay_run(
    store: SqlRunStore,
    run_id: str,
    job: Job | str | os.PathLike[str] | EngineFactory | None = None,
    *,
    live: bool = False,
) -> ReplayReport:
    """Replay the run ``run_id`` of ``store`` and compare it with its recording.

    ``job``: None for the job the run recorded; a :class:`~converge.jobs.Job` or a
    job file's path; or an :data:`EngineFactory` (a run started from Python).
    ``live``: call the models and run the non-deterministic suggestors for real.
    Returns the :class:`ReplayReport` (``first_divergence`` None when the replay
    promoted the same facts in every cycle and stopped the same way). Raises
    ``RunNotFound``, :class:`ReplayError` (among others for a run whose chain
    does not verify: its first bad seq named, nothing run), ``JobFileError`` (a job that does not
    load or build).
    """
    header = store.get_run_header(run_id)  # RunNotFound first
    check = store.verify(run_id)  # a replay compares with the recording: it must be the run's
    if not check.ok:
        raise ReplayError(
            f"run {run_id} does not verify: seq {check.first_bad_seq}: {check.reason}; "
            f"refusing to replay it (`converge verify {run_id}`)"
        )
    recorded = read_recording(store, run_id)
    if not recorded.started:
        raise ReplayError(f"run {run_id} has no run_started event: nothing to replay")
    link = recorded.forked_from
    if link is not None:
        raise ReplayError(
            f"run {run_id} is a fork of {link.get('run')} at cycle {link.get('cycle')}: "
            "replay the parent, or fork it again"
        )
    factory, job_name = _factory(header.job_spec, run_id, job)
    with tempfile.TemporaryDirectory(prefix="converge-replay-") as tmp:
        scratch = open_store(str(Path(tmp) / "replay.db"))
        try:
            engine = factory(scratch)
            engine.executor = None  # replay runs in this process
            engine.budget = recorded.budget()
            played = () if live else _play_back(engine, recorded)
            with _tape(recorded, live) as tape:
                _drive(engine, recorded)
            replayed = read_recording(scratch, run_id)
        finally:
            scratch.close()
    misses = [_divergence(m) for m in getattr(tape, "misses", ())]
    return ReplayReport(
        run_id=run_id,
        live=live,
        job=job_name or recorded.started.get("job"),
        expected_stop=comparable_stop(recorded.stop),
        got_stop=comparable_stop(replayed.stop),
        cycles=(_stop_field(recorded, "cycles"), _stop_field(replayed, "cycles")),
        facts=(_stop_field(recorded, "facts_count"), _stop_field(replayed, "facts_count")),
        facts_root=(_root(recorded), _root(replayed)),
        model_responses=int(getattr(tape, "served", 0)),
        played_back=played,
        divergences=compare(recorded, replayed, misses),
        models=(_models(recorded), _models(replayed)),
        redacted=tuple(f"{k}: {v}" for k, v in redacted_facts(recorded).items()),
    )


def _models(rec: Recording) -> tuple[str, ...]:
    """The models the run's agents named (``system:name``, sorted, once each)."""
    named = {
        str(ex.payload["model"])
        for cycle in rec.cycles.values()
        for ex in cycle.executions
        if isinstance(ex.payload.get("model"), str)
    }
    return tuple(sorted(named))


def _factory(
    recorded_job: dict[str, Any] | None,
    run_id: str,
    job: Job | str | os.PathLike[str] | EngineFactory | None,
) -> tuple[EngineFactory, str | None]:
    """The engine factory of ``job`` (the ``recorded_job`` when None) and the job's name."""
    if job is None:
        if not recorded_job:
            raise ReplayError(
                f"run {run_id} recorded no job: give the job to replay it with "
                "(converge replay RUN --job FILE, or replay_run(..., job=...))"
            )
        job = job_from_record(recorded_job)
    if isinstance(job, str | os.PathLike):
        job = load_job(job)
    if isinstance(job, Job):
        loaded = job
        # the agents' models: $CONVERGE_MODEL when set (a replay under other models
        # says so), else those the run recorded (converge.jobs.models)
        if loaded.recorded_models is None and recorded_job:
            loaded.recorded_models = models_from_record(recorded_job.get("models"))
        loaded.model_choice = ModelChoice(loaded.model_choice.model, allow_change=True)
        return (lambda s: loaded.build_engine(s)), loaded.name
    return job, None


def _play_back(engine: Engine, recorded: Recording) -> tuple[str, ...]:
    """Register a :class:`RecordedSuggestor` in place of each non-deterministic
    suggestor of ``engine`` (registration order kept); their names."""
    reg = engine.registry
    if not any(reg.records_effect):
        return ()
    marked = reg.records_effect
    suggestors = [
        RecordedSuggestor(s, recorded) if marked[i] else s for i, s in enumerate(reg.suggestors)
    ]
    new = SuggestorRegistry()
    new.add(*suggestors)
    new.records_effect = list(marked)
    engine.registry = new
    return tuple(n for i, n in enumerate(reg.names) if marked[i])


def _tape(recorded: Recording, live: bool) -> AbstractContextManager[Any]:
    """Agent runs answered from the recorded responses (nothing for a live replay,
    or a run no agent of which recorded any)."""
    if live:
        return nullcontext(None)
    runs: dict[tuple[int, str], list[Any]] = {}
    for n, cycle in recorded.cycles.items():
        for ex in cycle.executions:
            responses = ex.payload.get("responses")
            if isinstance(responses, list):
                runs[(n, ex.suggestor)] = responses
    try:
        from converge.agents.tape import ModelTape, playing
    except (ImportError, ConvergeError):  # no agents extra: no agent to answer
        return nullcontext(None)
    return playing(ModelTape(runs))


def _drive(engine: Engine, recorded: Recording) -> RunResult:
    """Run from the recorded initial facts, then go on after each stop as the
    recorded run did (a gate decided, a resume with a budget) while the replay
    stops where it stopped."""
    result = engine.run(recorded.initial() or None, run_id=recorded.run_id)
    legs = iter(recorded.legs)
    for leg in legs:
        reason = result.stop_reason
        if leg.gate_id is not None:
            if leg.decision is None or not (
                isinstance(reason, HitlGatePending) and reason.gate_id == leg.gate_id
            ):
                break
            result = engine.resume(leg.gate_id, leg.decision)
        elif isinstance(reason, HitlGatePending):
            # paused at a gate decided without a resume, then resumed with a budget
            # (`converge resume RUN --max-cycles N`): the gate's leg comes next
            gated = next(legs, None)
            if gated is None or gated.gate_id != reason.gate_id or gated.decision is None:
                break
            result = _decided_then_resumed(engine, reason, gated.decision, leg.budget)
        else:
            if not reason.is_resumable():
                break
            result = engine.resume_run(recorded.run_id, leg.budget)
    return result


def _decided_then_resumed(
    engine: Engine, paused: HitlGatePending, decision: GateDecision, budget: Budget | None
) -> RunResult:
    """The gate ``paused`` waits on decided in the scratch store, then the run resumed
    with ``budget``, as the recorded run went on."""
    store = engine.store
    assert store is not None  # replays run on a scratch store
    status = GateStatus.APPROVED if decision.approved else GateStatus.REJECTED
    gate = store.decide_gate(paused.gate_id, decision, status)
    return engine.resume_run(gate.run_id, budget)


def _divergence(miss: Any) -> Divergence:
    """A :class:`~converge.agents.tape.TapeMiss` as a divergence."""
    where = f"cycle {miss.cycle}, {miss.suggestor}: request {miss.request} of agent run {miss.run}"
    if miss.kind == "request":
        message = (
            f"{where} asks the model something else than the recorded run did (another "
            "prompt, or a tool that returned something else)"
        )
    else:
        message = f"{where} has no recorded response (the recording has none of it)"
    return Divergence(
        "request" if miss.kind == "request" else "unrecorded",
        miss.cycle,
        miss.suggestor,
        miss.expected,
        miss.got,
        message,
    )


def _stop_field(rec: Recording, name: str) -> int:
    if rec.stop is not None and isinstance(rec.stop.get(name), int):
        return int(rec.stop[name])
    return rec.last_cycle if name == "cycles" else len(rec.facts())


def _root(rec: Recording) -> str | None:
    value = (rec.stop or {}).get("facts_root")
    return str(value) if value else None
