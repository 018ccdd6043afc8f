"""The audited write path (issue: performance): promoted facts in bulk, the writer
thread, and checkpoints that refer to the store's fact chunks instead of carrying
every fact."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import create_engine, text

import audit.store
from audit import SqlRunStore, open_store
from engine import (
    Budget,
    Context,
    Engine,
    Error,
    ErrorCategory,
    Fact,
    GateDecision,
    HitlGatePending,
    Proposal,
    StoreError,
    facts_root,
    suggestor,
)
from engine.facts import fact_json
from gates import require_approval
from tests.strategies import json_trees

JSON_LEAF = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
)
JSON = json_trees(JSON_LEAF, key_size=5, max_leaves=8)
KEYS = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=8)


def _table_rows(store: SqlRunStore, sql: str) -> list[Any]:
    with store.transaction(write=False) as conn:
        return list(conn.execute(text(sql)).all())


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(proposals=st.lists(st.tuples(KEYS, JSON, st.sampled_from([1.0, 0.5, 1])), max_size=30))
def test_what_the_store_keeps_is_the_canonical_json_of_each_fact(
    tmp_path_factory: pytest.TempPathFactory, proposals: list[tuple[str, Any, float]]
) -> None:
    # the merge builds each fact's JSON from parts quoted once; the store inserts it
    # through json_each (SQLite): both must give fact_json's exact bytes
    @suggestor(name='odd "name"\\')
    def emit(ctx: Context) -> list[Proposal]:
        if ctx.cycle > 1:
            return []
        return [Proposal(k, c, confidence=conf) for k, c, conf in proposals]

    store = open_store(str(tmp_path_factory.mktemp("canon") / "a.db"))
    result = Engine(budget=Budget(max_cycles=3), store=store).register(emit).run(run_id="r")
    stored = [e.payload for e in store.events("r", kinds=["fact_promoted"])]
    assert stored == [json.loads(fact_json(f)) for f in result.context]
    payloads = _table_rows(store, "SELECT payload FROM audit_events WHERE kind = 'fact_promoted'")
    assert [p[0] for p in payloads] == [fact_json(f) for f in result.context]
    assert store.run("r").facts_root == facts_root(result.context)
    assert store.verify("r").ok
    store.close()


def _burst(facts: int) -> Any:
    @suggestor(name="burst", dependencies=["tick"])
    def burst(ctx: Context) -> list[Proposal]:
        base = ctx.cycle * facts
        return [Proposal("n", f"line\t{base + i}\\\n\u00e9") for i in range(facts)] + [
            Proposal("tick", ctx.cycle)
        ]

    return burst


def test_big_batches_go_through_the_writer_thread_and_verify(store_url: str) -> None:
    store = open_store(store_url)
    assert store.write_behind_events is not None and store.write_behind_events <= 1500
    engine = Engine(budget=Budget(max_cycles=6), store=store).register(_burst(1500))
    result = engine.run({"tick": [0]}, run_id="big")
    report = store.verify("big")
    assert report.ok, report
    assert report.events > 6 * 1500
    assert [f.content for f in store.facts("big")] == [f.content for f in result.context]
    assert store.run("big").facts_root == facts_root(result.context)
    store.close()


def test_a_failed_background_commit_stops_the_run_with_a_storage_error(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "fail.db"))
    inserter = store.inserter
    real = inserter.insert
    calls = {"n": 0}

    def failing(conn: Any, batch: Any, first: int) -> None:
        calls["n"] += 1
        if len(batch) >= 1000 and calls["n"] >= 4:
            raise StoreError("disk full")
        real(conn, batch, first)

    inserter.insert = failing  # type: ignore[method-assign]
    engine = Engine(budget=Budget(max_cycles=20), store=store).register(_burst(1200))
    result = engine.run({"tick": [0]}, run_id="fail")
    assert isinstance(result.stop_reason, Error)
    assert result.stop_reason.error_category == ErrorCategory.STORAGE
    assert "disk full" in result.stop_reason.message
    inserter.insert = real  # type: ignore[method-assign]
    # what was committed before the failure is whole and verifies; the stop is recorded
    assert store.verify("fail").ok
    row = store.run("fail")
    assert row.status == "stopped" and row.category == "error"
    promoted = store.events("fail", kinds=["fact_promoted"])
    assert len(promoted) % 1201 == 0 and len(promoted) < len(result.context)
    store.close()


@suggestor(name="counter")
def counter(ctx: Context) -> list[Proposal]:
    return [Proposal("n", ctx.count("n"))]


def _checkpoint_blob(db: str, run_id: str) -> str:
    engine = create_engine(f"sqlite:///{db}")
    try:
        with engine.connect() as conn:
            return str(
                conn.execute(
                    text("SELECT data FROM checkpoints WHERE run_id = :r"), {"r": run_id}
                ).scalar()
            )
    finally:
        engine.dispose()


def _many(n: int) -> Any:
    @suggestor(name="many")
    def many(ctx: Context) -> list[Proposal]:
        if ctx.cycle == 1:
            return [Proposal("n", i) for i in range(n)]
        return [Proposal("done", True)] if ctx.cycle == 2 else []

    return many


def test_a_checkpoint_stays_small_however_many_facts_the_run_has(tmp_path: Path) -> None:
    db = str(tmp_path / "small.db")
    store = open_store(db)
    sizes = {}
    gate = require_approval(when=lambda p, c: p.key == "done")
    for n in (10, 20_000):
        engine = Engine(budget=Budget(max_cycles=5, max_facts=0), gates=[gate], store=store)
        stop = engine.register(_many(n)).run(run_id=f"r{n}").stop_reason
        assert isinstance(stop, HitlGatePending)
        sizes[n] = len(_checkpoint_blob(db, f"r{n}"))
    # the run's state and its Merkle frontier (log n), not its facts (1.6 MB as rows)
    assert sizes[20_000] < 2 * sizes[10] < 4000
    # and it resumes with every fact, in order
    engine = Engine(budget=Budget(max_cycles=5, max_facts=0), store=store)
    engine.register(_many(20_000))
    result = engine.resume("r20000-g1", GateDecision.approve(by="alice"))
    assert [f.content for f in result.context.get("n")] == list(range(20_000))
    assert result.context.get("done")
    assert store.verify("r20000").ok
    store.close()


class _InlineStore(SqlRunStore):
    """A store that does not keep fact chunks: its checkpoints carry the facts (as
    a version 2 store wrote them)."""

    keeps_fact_chunks = False


def test_a_checkpoint_that_carries_its_facts_still_resumes(tmp_path: Path) -> None:
    db = str(tmp_path / "inline.db")
    opened = open_store(db)
    inline = _InlineStore(opened.url)
    gate = require_approval(when=lambda p, c: p.key == "n" and p.content == 30)
    first = Engine(budget=Budget(max_cycles=50), gates=[gate], store=inline)
    paused = first.register(counter).run({"n": [0]}, run_id="old")
    assert isinstance(paused.stop_reason, HitlGatePending)
    assert isinstance(json.loads(_checkpoint_blob(db, "old"))["facts"], list)
    engine = Engine(budget=Budget(max_cycles=50), gates=[gate], store=opened, checkpoint_every=5)
    result = engine.register(counter).resume(
        paused.stop_reason.gate_id, GateDecision.approve(by="alice")
    )
    assert [f.content for f in result.context.get("n")] == list(range(51))
    assert opened.verify("old").ok


def test_changed_fact_chunks_are_refused_on_resume_and_named_by_verify(tmp_path: Path) -> None:
    db = str(tmp_path / "tamper.db")
    store = open_store(db)
    gate = require_approval(when=lambda p, c: p.key == "n" and p.content == 20)
    paused = Engine(budget=Budget(max_cycles=40), gates=[gate], store=store)
    stop = paused.register(counter).run({"n": [0]}, run_id="t").stop_reason
    assert isinstance(stop, HitlGatePending)
    engine = create_engine(f"sqlite:///{db}")
    with engine.begin() as conn:
        conn.execute(
            text("UPDATE fact_chunks SET data = replace(data, :a, :b) WHERE run_id = 't'"),
            {"a": '"n",7,', "b": '"n",8,'},
        )
    engine.dispose()
    report = store.verify("t")
    assert not report.ok and report.reason == "fact chunks differ from the checkpoint"
    from engine import ResumeError

    with pytest.raises(ResumeError, match="differs from the one its chain recorded"):
        Engine(budget=Budget(max_cycles=40), store=store).register(counter).resume(
            stop.gate_id, GateDecision.approve(by="alice")
        )


def test_a_version_2_store_is_upgraded_in_place(tmp_path: Path) -> None:
    db = str(tmp_path / "v2.db")
    store = _InlineStore(open_store(db).url)  # version 2 kept facts in checkpoints
    Engine(budget=Budget(max_cycles=3), store=store).register(counter).run({"n": [0]}, run_id="a")
    store.close()
    engine = create_engine(f"sqlite:///{db}")
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE fact_chunks"))
        conn.execute(text("UPDATE converge_meta SET value = '2' WHERE key = 'schema_version'"))
    engine.dispose()
    store = open_store(db)
    assert store.verify("a").ok
    Engine(budget=Budget(max_cycles=3), store=store).register(counter).run({"n": [0]}, run_id="b")
    assert store.verify("b").ok
    version = _table_rows(store, "SELECT value FROM converge_meta WHERE key = 'schema_version'")
    assert version[0][0] == str(audit.store.SCHEMA_VERSION)


def test_a_fact_is_the_same_object_whatever_the_store(tmp_path: Path) -> None:
    # the batch item a store receives stands for one fact_promoted event per fact
    from engine import AuditEvent, PromotedFacts, expand_events

    batch = PromotedFacts(3, 1.5)
    f = Fact("k#0", "k", 1, 1.0, _prov())
    batch.facts.append(f)
    batch.texts.append(fact_json(f))
    [event] = expand_events([batch])
    assert isinstance(event, AuditEvent)
    assert (event.kind, event.cycle, event.ts, event.payload["id"]) == (
        "fact_promoted",
        3,
        1.5,
        "k#0",
    )


def _prov() -> Any:
    from engine import Provenance

    return Provenance("s", 3, "s/3/0.0", ())


def test_a_failed_batch_is_reported_to_its_own_run_only(tmp_path: Path) -> None:
    # two runs sharing one store from two threads: the writer thread's failure of
    # one run's batch stops that run, never the other
    import threading

    store = open_store(str(tmp_path / "two.db"))
    inserter = store.inserter
    real = inserter.insert

    def failing(conn: Any, batch: Any, first: int) -> None:
        if batch.run_id == "bad" and len(batch) >= 1000:
            raise StoreError("disk full")
        real(conn, batch, first)

    inserter.insert = failing  # type: ignore[method-assign]
    results: dict[str, Any] = {}

    def run(run_id: str) -> None:
        engine = Engine(budget=Budget(max_cycles=8), store=store).register(_burst(1100))
        results[run_id] = engine.run({"tick": [0]}, run_id=run_id)

    threads = [threading.Thread(target=run, args=(r,)) for r in ("bad", "good")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    bad, good = results["bad"].stop_reason, results["good"].stop_reason
    assert isinstance(bad, Error) and bad.error_category == ErrorCategory.STORAGE
    assert not isinstance(good, Error), good
    assert store.verify("good").ok and store.verify("bad").ok
    assert len(store.facts("good")) == len(results["good"].context)
    store.close()


def test_the_writer_checkpoints_the_wal_once_idle_so_the_database_file_holds_the_run(
    tmp_path: Path,
) -> None:
    # 9,000 events stay far below wal_autocheckpoint: only the writer's idle checkpoint
    # copies them into the database file, which a backup of that file alone then holds
    db = tmp_path / "wal.db"
    store = open_store(str(db))
    engine = Engine(budget=Budget(max_cycles=6), store=store).register(_burst(1500))
    result = engine.run({"tick": [0]}, run_id="wal")
    store.writer.close()  # the queue and the idle work
    copy = tmp_path / "copy.db"
    copy.write_bytes(db.read_bytes())  # the file without its -wal
    backup = create_engine(f"sqlite:///{copy}")
    try:
        with backup.connect() as conn:
            promoted = conn.execute(
                text("SELECT count(*) FROM audit_events WHERE kind = 'fact_promoted'")
            ).scalar()
    finally:
        backup.dispose()
    assert promoted == len(result.context) - 1  # every promoted fact (not the input tick)
    store.close()


def test_the_idle_work_runs_after_the_waiters_are_released_and_close_waits_for_it() -> None:
    from audit.writing import BackgroundWriter

    release, done = threading.Event(), threading.Event()
    seen: dict[str, bool] = {}

    def idle() -> None:
        seen["released"] = release.wait(timeout=30)  # False: the test never let it go
        done.set()

    committed: list[Any] = []
    writer = BackgroundWriter("test-writer", lambda run_id, items: committed.extend(items), idle)
    writer.submit("r", "batch")
    writer.wait("r")  # returns while the idle work is still blocked
    assert committed == ["batch"]
    release.set()
    writer.close()
    assert done.is_set() and seen["released"]


def test_batches_committed_during_the_idle_work_get_it_again() -> None:
    # the second batch is committed by a new thread while the first thread's idle
    # work is still running: the WAL it adds must be checkpointed too
    from audit.writing import BackgroundWriter

    committed: list[Any] = []
    seen: list[list[Any]] = []
    first_started, release = threading.Event(), threading.Event()

    def idle() -> None:
        seen.append(list(committed))
        if len(seen) == 1:
            first_started.set()
            release.wait(timeout=30)

    writer = BackgroundWriter("test-writer", lambda run_id, items: committed.extend(items), idle)
    writer.submit("r", 1)
    assert first_started.wait(timeout=30)
    writer.submit("r", 2)
    writer.wait("r")
    release.set()
    writer.close()
    assert seen == [[1], [1, 2]]


def test_failing_idle_work_fails_no_run() -> None:
    from audit.writing import BackgroundWriter

    def idle() -> None:
        raise OSError("checkpoint failed")

    committed: list[Any] = []
    writer = BackgroundWriter("test-writer", lambda run_id, items: committed.extend(items), idle)
    writer.submit("r", 1)
    writer.close()
    writer.submit("r", 2)
    writer.wait("r")
    writer.close()
    assert committed == [1, 2]


def test_only_a_sqlite_file_store_checkpoints_when_idle(tmp_path: Path) -> None:
    file_store, memory_store = open_store(str(tmp_path / "f.db")), open_store(":memory:")
    assert file_store.writer._idle is not None
    assert memory_store.writer._idle is None  # one shared connection: no second user
    file_store.close()
    memory_store.close()


def test_two_writers_overlapping_give_the_switch_interval_back() -> None:
    # the interval is process-wide: each writer saving and restoring it on its own
    # left the short one behind for good when two overlapped (the second saved the
    # first's short interval and restored it last)
    from audit.writing import BackgroundWriter

    before = sys.getswitchinterval()
    entered = {"a": threading.Event(), "b": threading.Event()}
    release = {"a": threading.Event(), "b": threading.Event()}

    def committer(name: str) -> Any:
        def commit(run_id: str, items: list[Any]) -> None:
            entered[name].set()
            release[name].wait(timeout=30)

        return commit

    a = BackgroundWriter("writer-a", committer("a"))
    b = BackgroundWriter("writer-b", committer("b"))
    a.submit("ra", 1)
    assert entered["a"].wait(timeout=30)
    assert sys.getswitchinterval() < before  # shortened while a commits
    b.submit("rb", 1)
    assert entered["b"].wait(timeout=30)
    release["a"].set()
    a.wait("ra")  # a done first, b still committing
    assert sys.getswitchinterval() < before
    release["b"].set()
    b.wait("rb")
    assert sys.getswitchinterval() == before
