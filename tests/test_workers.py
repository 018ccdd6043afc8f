"""Scale-out: the same run in-process and on Celery workers (DESIGN.md §13).

The workers are real ``converge worker`` processes on the machine's RabbitMQ and
Redis, on a queue of their own. Without those services the tests skip, unless
``$CI`` is set: then they fail.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from audit import open_store
from converge.errors import JobFileError
from converge.jobs import load_job, parse_job
from converge.workers import CeleryExecutor, RemoteSuggestorError, reference_of
from converge.workers.wire import (
    decode_remaining,
    encode_exception,
    encode_output,
    encode_remaining,
    outcome_of,
    record_replied_usage,
    with_recorded_usage,
)
from engine import (
    Budget,
    ConfigurationError,
    Context,
    CycleWork,
    Effect,
    Engine,
    Error,
    ErrorCategory,
    GateDecision,
    Proposal,
    RemainingBudget,
    RunResult,
    StopRun,
    TokenBudgetExhausted,
    Usage,
    suggestor,
)
from tests import workerfixtures as wf

DEP_AUDIT = Path(__file__).resolve().parent.parent / "examples" / "dependency_audit" / "job.yaml"


@pytest.fixture(scope="module")
def workers() -> Iterator[wf.Workers]:
    yield from wf.started_workers(2)


def _facts(result: RunResult) -> list[tuple[Any, ...]]:
    return [(f.id, f.key, f.content, f.confidence, f.provenance) for f in result.context]


TIMING = ("run_id", "ts", "started_at", "duration_ms", "seconds", "elapsed_ms", "decided_at")
# a stop's end time and a gate's opening and deadline, chained for verify (issue 29)
TIMING += ("ended_at", "opened_at", "expires_at")
# a checkpoint holds the run's elapsed time, so its digest is a clock reading too
TIMING += ("checkpoint_sha256",)


def _timeless(data: Any) -> Any:
    """``data`` without its clock readings (durations, timestamps) and run ids."""
    if isinstance(data, dict):
        return {k: _timeless(v) for k, v in data.items() if k not in TIMING}
    if isinstance(data, list):
        return [_timeless(v) for v in data]
    return data


def _trail(store: Any, run_id: str) -> list[tuple[str, int, Any]]:
    """The run's audit events, in order, timing aside."""
    return [(e.kind, e.cycle, _timeless(e.payload)) for e in store.events(run_id)]


def _run_both(tmp_path: Path, build: Any, initial: Any, executor: CeleryExecutor) -> Any:
    """Run ``build(store, executor)`` in-process and remotely; both results and stores."""
    local_store = open_store(str(tmp_path / "local.db"))
    remote_store = open_store(str(tmp_path / "remote.db"))
    local = build(local_store, None).run(initial, run_id="same-run")
    remote = build(remote_store, executor).run(initial, run_id="same-run")
    return local, remote, local_store, remote_store


def _assert_same(local: RunResult, remote: RunResult, ls: Any, rs: Any) -> None:
    assert _facts(remote) == _facts(local)
    assert remote.stop_reason == local.stop_reason
    assert remote.cycles == local.cycles
    assert remote.usage == local.usage
    assert rs.run(remote.run_id).facts_root == ls.run(local.run_id).facts_root
    assert [e[0] for e in _trail(rs, remote.run_id)] == [e[0] for e in _trail(ls, local.run_id)]
    local_events = [(k, c, p) for k, c, p in _trail(ls, local.run_id) if k != "run_started"]
    remote_events = [(k, c, p) for k, c, p in _trail(rs, remote.run_id) if k != "run_started"]
    assert remote_events == local_events
    assert rs.verify(remote.run_id).ok


def test_a_50_suggestor_job_gives_the_same_facts_root_stop_and_audit_on_2_workers(
    workers: wf.Workers, tmp_path: Path
) -> None:
    def build(store: Any, executor: CeleryExecutor | None) -> Engine:
        engine = Engine(store=store, executor=executor)
        return engine.register(wf.seed_from_input, *wf.SYNTHETIC)

    local, remote, ls, rs = _run_both(tmp_path, build, {"input": [1, 2, 3]}, workers.executor())
    assert len(local.context) > 50 and local.cycles == 6
    _assert_same(local, remote, ls, rs)


def _remote_job(path: Path, queue: str) -> Any:
    """The job at ``path`` with ``executor: {celery: ...}`` on ``queue`` (backend from $)."""
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    raw["executor"] = {
        "celery": {"broker": wf.BROKER, "backend": "$CONVERGE_TEST_W_BACKEND", "queue": queue}
    }
    return parse_job(yaml.safe_dump(raw), str(path))


@pytest.fixture
def backend_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONVERGE_TEST_W_BACKEND", wf.BACKEND)


def test_the_dependency_audit_job_gives_the_same_result_on_2_workers_through_its_job_file(
    workers: wf.Workers, tmp_path: Path, backend_variable: None
) -> None:
    remote_job = _remote_job(DEP_AUDIT, workers.queue)
    local_job = load_job(DEP_AUDIT)
    initial = local_job.spec.initial

    def build(store: Any, executor: CeleryExecutor | None) -> Engine:
        engine = (remote_job if executor else local_job).build_engine(store)
        assert isinstance(engine.executor, CeleryExecutor) == bool(executor)
        if executor:
            workers.executors.append(engine.executor)  # closed with the workers
        return engine

    local, remote, ls, rs = _run_both(tmp_path, build, initial, workers.executor())
    assert len(local.context) > 20 and local.stop_reason.kind == "criteria_met"
    _assert_same(local, remote, ls, rs)


def test_a_run_paused_at_a_gate_on_workers_resumes_to_the_same_result_as_in_process(
    workers: wf.Workers, tmp_path: Path, backend_variable: None
) -> None:
    path = DEP_AUDIT.with_name("vendored.yaml")
    remote_job, local_job = _remote_job(path, workers.queue), load_job(path)
    initial = local_job.spec.initial
    ls, rs = open_store(str(tmp_path / "l.db")), open_store(str(tmp_path / "r.db"))
    local = local_job.build_engine(ls).run(initial, run_id="gated")
    remote_engine = remote_job.build_engine(rs)
    workers.executors.append(remote_engine.executor)  # closed with the workers
    remote = remote_engine.run(initial, run_id="gated")
    assert remote.stop_reason.kind == local.stop_reason.kind == "hitl_gate_pending"
    assert _facts(remote) == _facts(local)
    gate = rs.gates(pending=True)[0].gate_id
    assert gate == ls.gates(pending=True)[0].gate_id
    decision = GateDecision.approve(by="alice")
    local = local_job.build_engine(ls).resume(gate, decision)
    remote_engine = remote_job.build_engine(rs)  # another engine: the run comes from the store
    workers.executors.append(remote_engine.executor)
    remote = remote_engine.resume(gate, decision)
    _assert_same(local, remote, ls, rs)


def test_two_runs_at_once_on_one_executor_each_give_their_in_process_facts(
    workers: wf.Workers,
) -> None:
    executor = workers.executor()
    engine = Engine(executor=executor).register(wf.seed_from_input, *wf.SYNTHETIC)
    inputs = [[1, 2, 3], [7]]
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda i: engine.run({"input": i}), inputs))
    for got, i in zip(results, inputs, strict=True):
        local = Engine().register(wf.seed_from_input, *wf.SYNTHETIC).run({"input": i})
        assert _facts(got) == _facts(local)
    executor.close()


def test_arun_on_workers_gives_the_same_facts_as_run_in_process(workers: wf.Workers) -> None:
    def build(executor: CeleryExecutor | None) -> Engine:
        return Engine(executor=executor).register(wf.seed_from_input, *wf.SYNTHETIC)

    remote = asyncio.run(build(workers.executor()).arun({"input": [1, 2, 3]}))
    assert _facts(remote) == _facts(build(None).run({"input": [1, 2, 3]}))


def test_a_stop_run_raised_on_a_worker_stops_the_run_as_in_process(
    workers: wf.Workers,
) -> None:
    def run(executor: CeleryExecutor | None) -> RunResult:
        engine = Engine(executor=executor).register(wf.first, wf.stopper, wf.second)
        return engine.run({"input": ["a", "b"]})

    local, remote = run(None), run(workers.executor())
    assert remote.stop_reason == local.stop_reason
    assert remote.stop_reason.kind == "stop_requested"
    assert _facts(remote) == _facts(local)


def test_usage_a_failing_suggestor_recorded_on_a_worker_counts_as_in_process(
    workers: wf.Workers,
) -> None:
    def run(executor: CeleryExecutor | None) -> RunResult:
        engine = Engine(executor=executor, on_error="continue")
        return engine.register(wf.first, wf.costly, wf.second).run({"input": ["a"]})

    local, remote = run(None), run(workers.executor())
    assert local.usage == remote.usage == Usage(120, 30, 0.5)
    assert _facts(remote) == _facts(local)


def test_an_agent_on_a_worker_caps_its_call_with_what_is_left_of_the_budget(
    workers: wf.Workers,
) -> None:
    from tests.workeragents import researcher

    def run(executor: CeleryExecutor | None) -> RunResult:
        engine = Engine(executor=executor, budget=Budget(max_cycles=5, max_tokens=2000))
        return engine.register(researcher).run({"input": ["licenses"]})

    # found at the module-level name agent_suggestor's caller bound it to
    assert reference_of(researcher) == "tests.workeragents:researcher"
    local, remote = run(None), run(workers.executor())
    # stopped inside the call after the response that crossed 2,000 tokens
    assert local.usage.total_tokens == 2250
    assert remote.stop_reason == local.stop_reason
    assert remote.usage == local.usage
    assert remote.facts_root == local.facts_root


def test_the_remaining_budget_travels_to_the_worker_context() -> None:
    left = RemainingBudget(
        tokens=100,
        cost_usd=0.5,
        invocations=None,
        seconds=2.5,
        per_suggestor={"agent.lookup": 3},
        budget=Budget(max_tokens=900, per_suggestor={"agent.lookup": 4}),
    )
    sent = json.loads(json.dumps(encode_remaining(left)))
    assert Context.of([], 1, decode_remaining(sent)).remaining_budget() == left
    assert Context.of([], 1).remaining_budget() is None
    with pytest.raises(TypeError):
        decode_remaining({"tokens": "many"})


@pytest.mark.parametrize("ship", ["context", "dependencies", "backend"])
def test_every_way_of_shipping_the_context_gives_the_same_facts(
    workers: wf.Workers, ship: str
) -> None:
    def run(executor: CeleryExecutor | None) -> RunResult:
        engine = Engine(executor=executor).register(wf.seed_from_input, *wf.SYNTHETIC)
        return engine.run({"input": [1, 2]})

    executor = workers.executor(ship=ship)
    try:
        assert _facts(run(executor)) == _facts(run(None))
        assert _facts(run(executor)) == _facts(run(None))  # a second run on the same executor
    finally:
        executor.close()


def test_a_suggestor_a_worker_cannot_import_stops_the_run_with_a_configuration_error(
    workers: wf.Workers,
) -> None:
    executor = workers.executor(references={"second": "tests.workerfixtures:no_such_thing"})
    result = Engine(executor=executor).register(wf.first, wf.second).run({"input": ["a"]})
    assert isinstance(result.stop_reason, Error), str(result.stop_reason)
    assert result.stop_reason.error_category == ErrorCategory.CONFIGURATION
    assert "second" in result.stop_reason.message
    assert [f.key for f in result.context] == ["input", "step"]  # cycle 1 kept


# -- without workers -------------------------------------------------------------------
class Reversed:
    """An executor running the cycle's suggestors last to first, in this process."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, list[str], float | None]] = []

    def execute(self, work: CycleWork) -> list[Any]:
        self.seen.append((work.cycle, [s.name for s in work.suggestors], work.remaining_s))
        assert work.context.cycle == work.cycle and not work.is_cancelled()
        outcomes: list[Any] = [None] * len(work.suggestors)
        for slot in reversed(range(len(work.suggestors))):
            outcomes[slot] = work.suggestors[slot].execute(work.context)
        return outcomes


def test_an_executor_finishing_in_any_order_gives_the_facts_of_registration_order() -> None:
    executor = Reversed()
    remote = Engine(executor=executor).register(wf.seed_from_input, *wf.SYNTHETIC)
    local = Engine().register(wf.seed_from_input, *wf.SYNTHETIC)
    assert _facts(remote.run({"input": [1, 2]})) == _facts(local.run({"input": [1, 2]}))
    assert executor.seen[1] == (2, [s.name for s in wf.SYNTHETIC[:10]], None)


def test_an_executor_gets_only_the_suggestors_the_invocation_budget_admits() -> None:
    executor = Reversed()
    engine = Engine(budget=Budget(max_invocations=4, max_seconds=60), executor=executor)
    result = engine.register(wf.seed_from_input, *wf.SYNTHETIC).run({"input": [1]})
    assert [len(names) for _, names, _ in executor.seen] == [1, 3]
    assert all(r is not None and 0 < r <= 60 for _, _, r in executor.seen)
    assert result.stop_reason.kind == "invocation_budget_exhausted"


class Broken:
    """An executor with a defect."""

    def execute(self, work: CycleWork) -> list[Any]:
        raise RuntimeError("bug")


def test_an_executor_that_raises_ends_the_run_with_an_internal_error_and_the_facts_so_far() -> None:
    result = Engine(executor=Broken()).register(wf.first).run({"input": ["a"]})
    assert isinstance(result.stop_reason, Error)
    assert result.stop_reason.error_category == ErrorCategory.INTERNAL
    assert result.stop_reason.message == "executor Broken failed: RuntimeError: bug"
    assert [f.key for f in result.context] == ["input"]


def test_an_object_without_execute_is_refused_as_an_executor() -> None:
    with pytest.raises(ConfigurationError, match="execute"):
        Engine(executor=object())  # type: ignore[arg-type]


def test_a_suggestor_that_is_not_at_module_level_cannot_be_shipped_and_stops_the_run() -> None:
    @suggestor(name="local_only", dependencies=["input"])
    def local_only(ctx: Any) -> list[Proposal]:
        return []

    with pytest.raises(ConfigurationError, match="local_only"):
        reference_of(local_only)
    executor = CeleryExecutor("amqp://guest:guest@127.0.0.1:1//", "redis://127.0.0.1:1/0")
    result = Engine(executor=executor).register(local_only).run({"input": [1]})
    assert result.stop_reason.kind == "error"
    assert isinstance(result.stop_reason, Error)
    assert result.stop_reason.error_category == ErrorCategory.CONFIGURATION
    assert "local_only" in result.stop_reason.message
    assert [f.key for f in result.context] == ["input"]


def test_module_level_suggestors_and_members_of_module_level_lists_have_references() -> None:
    assert reference_of(wf.first) == "tests.workerfixtures:first"
    assert reference_of(wf.SYNTHETIC[7]) == "tests.workerfixtures:SYNTHETIC"
    assert reference_of(wf.first, {"first": "pkg.mod:other"}) == "pkg.mod:other"


def test_a_worker_reply_rebuilds_the_outcome_an_in_process_execution_gives() -> None:
    effect = Effect([Proposal("k", {"a": [1, 2]}, 0.5, ("x#0",), "p1")], Usage(1, 2, 0.25))
    assert outcome_of(encode_output(effect), "s") == effect
    plain = outcome_of(encode_output([Proposal("k", 1)]), "s")
    assert plain == Effect([Proposal("k", 1)])
    assert outcome_of(encode_output(Effect.refuse("no")), "s").refusal == "no"
    # what an agent reports of its own loop travels too
    inner = Effect(
        [],
        Usage(5, 6, 0.1),
        tool_calls=("a.lookup", "a.lookup"),
        signal=TokenBudgetExhausted(tokens_consumed=11, limit=10),
        audit={"model": "function", "stopped_inside": "token_budget_exhausted"},
    )
    assert outcome_of(json.loads(json.dumps(encode_output(inner))), "s") == inner
    raised = outcome_of(encode_exception(ValueError("boom")), "s")
    assert isinstance(raised, RemoteSuggestorError)
    assert f"{type(raised).__name__}: {raised}" == "ValueError: boom"
    stop = outcome_of(encode_exception(StopRun("enough", context={"n": 1})), "s")
    assert isinstance(stop, StopRun) and stop.context == {"n": 1}
    with pytest.raises(ConfigurationError, match="cannot run suggestor 's'"):
        outcome_of({"unusable": "ImportReferenceError: no module"}, "s")


def test_usage_recorded_on_a_worker_travels_with_its_reply_to_the_runs_context() -> None:
    worker_ctx, run_ctx = Context(), Context()
    worker_ctx.record_usage("s", Usage(3, 4, 0.5))
    reply = with_recorded_usage(encode_exception(ValueError("boom")), worker_ctx)
    record_replied_usage(json.loads(json.dumps(reply)), run_ctx)
    assert run_ctx.recorded_usage() == [("s", Usage(3, 4, 0.5))]
    with pytest.raises(ConfigurationError, match="bad recorded usage"):
        record_replied_usage({"recorded": [["s", -1, 0, 0.0]]}, run_ctx)


def test_a_job_file_executor_naming_an_unset_variable_is_an_error_naming_the_field() -> None:
    text = (
        "name: j\nsuggestors: [tests.workerfixtures:first]\n"
        "executor:\n  celery: {broker: $CONVERGE_UNSET_BROKER_VAR, backend: redis://x}\n"
    )
    with pytest.raises(JobFileError, match=r"job.yaml:4: executor\.celery\.broker.*CONVERGE_UNSET"):
        parse_job(text, "job.yaml").build_engine()


def test_a_job_file_executor_with_an_unknown_field_is_refused() -> None:
    text = (
        "name: j\nsuggestors: [tests.workerfixtures:first]\n"
        "executor:\n  celery: {broker: amqp://x, backend: redis://x, bogus: 1}\n"
    )
    with pytest.raises(JobFileError, match="bogus"):
        parse_job(text, "job.yaml")
