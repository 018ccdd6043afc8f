"""Checkpoints: bounded values, periodic saves so a crash replays few cycles, a
crashed run's row that tells what its events prove, and a stop recorded even when
its final write fails (issue: reliability, item 4)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

import audit.store
import audit.trail._checkpoints
from audit import SqlRunStore, open_store
from engine import (
    Budget,
    Context,
    CycleBudgetExhausted,
    Engine,
    Error,
    ErrorCategory,
    GateDecision,
    HitlGatePending,
    Proposal,
    StoreError,
    suggestor,
)
from gates import require_approval
from tests.ledgerfixtures import url

__all__ = ["url"]  # a fixture, used by name

ROOT = Path(__file__).resolve().parent.parent


@suggestor(name="counter")
def counter(ctx: Context) -> list[Proposal]:
    return [Proposal("n", ctx.count("n"), parents=(f"n#{ctx.count('n') - 1}",))]


def _count(db: str, table: str) -> int:
    engine = create_engine(f"sqlite:///{db}")
    try:
        with engine.connect() as conn:
            return int(conn.execute(text(f"SELECT count(*) FROM {table}")).scalar() or 0)
    finally:
        engine.dispose()


def test_a_checkpoint_larger_than_one_value_is_stored_in_parts_and_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(audit.store, "CHECKPOINT_PART_CHARS", 200)
    db = str(tmp_path / "parts.db")
    store = open_store(db)

    def make() -> Engine:
        gate = require_approval(when=lambda p, c: p.key == "n" and p.content == 40)
        return Engine(budget=Budget(max_cycles=60), gates=[gate], store=store).register(counter)

    first = make().run({"n": [0]}, run_id="big")
    assert isinstance(first.stop_reason, HitlGatePending)
    # the run's state does not fit in 200 characters (its 40 facts are in fact_chunks)
    assert _count(db, "checkpoint_parts") >= 2
    result = make().resume(first.stop_reason.gate_id, GateDecision.approve(by="alice"))
    assert isinstance(result.stop_reason, CycleBudgetExhausted)
    assert [f.content for f in result.context.get("n")] == list(range(61))
    assert store.verify("big").ok


def test_a_run_in_flight_is_checkpointed_every_checkpoint_every_cycles(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "every.db"))
    engine = Engine(budget=Budget(max_cycles=35), store=store, checkpoint_every=10)
    engine.register(counter).run({"n": [0]}, run_id="every")
    saved = store.events("every", kinds=["checkpoint_saved"])
    assert [e.payload["cycle"] for e in saved] == [10, 20, 30]
    assert store.verify("every").ok


def test_checkpoint_every_must_be_positive() -> None:
    from engine import ConfigurationError

    with pytest.raises(ConfigurationError, match="checkpoint_every"):
        Engine(checkpoint_every=0)


CRASH = textwrap.dedent(
    """
    import os, signal, sys
    from audit import open_store
    from engine import Budget, Engine, Proposal, suggestor

    @suggestor(name="counter")
    def counter(ctx):
        if ctx.cycle == 57 and os.environ.get("CRASH_AT_57"):
            os.kill(os.getpid(), signal.SIGKILL)  # kill -9 in the middle of cycle 57
        return [Proposal("n", ctx.count("n"))]

    store = open_store(sys.argv[1])
    engine = Engine(budget=Budget(max_cycles=80), store=store, checkpoint_every=10)
    engine.register(counter).run({"n": [0]}, run_id="crash")
    """
)


def _counter_engine(store: SqlRunStore) -> Engine:
    @suggestor(name="counter")
    def again(ctx: Context) -> list[Proposal]:
        return [Proposal("n", ctx.count("n"))]

    return Engine(budget=Budget(max_cycles=80), store=store, checkpoint_every=10).register(again)


def _crashed_at_57(tmp_path: Path) -> SqlRunStore:
    """The store of run ``crash``, killed (-9) in the middle of cycle 57."""
    db = str(tmp_path / "crash.db")
    script = tmp_path / "crash.py"
    script.write_text(CRASH, encoding="utf-8")
    env = {"CRASH_AT_57": "1", "PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, str(script), db], env=env, timeout=60, check=False)
    assert done.returncode == -9
    return open_store(db)


def test_a_crash_replays_at_most_checkpoint_every_cycles_and_its_row_tells_the_truth(
    tmp_path: Path,
) -> None:
    store = _crashed_at_57(tmp_path)
    row = store.run("crash")
    assert row.status == "crashed"
    # what the committed events prove: 56 cycles done, 57 facts (the input and one a cycle)
    assert (row.cycles, row.facts_count) == (56, 57)
    assert store.load_checkpoint("crash")["cycle"] == 50
    result = _counter_engine(store).resume_run("crash")
    assert isinstance(result.stop_reason, CycleBudgetExhausted)
    assert [f.content for f in result.context.get("n")] == list(range(81))
    resumed = [e for e in store.events("crash") if e.kind == "run_resumed"]
    assert resumed[-1].payload["from"] == "crash" and resumed[-1].cycle == 50  # ≤ 10 replayed
    promoted = [e.payload["id"] for e in store.events("crash", kinds=["fact_promoted"])]
    assert len(promoted) == len(set(promoted)) == 80  # no fact recorded twice
    assert store.verify("crash").ok


def test_a_recovery_whose_replay_gives_other_content_stops_without_recording_it_again(
    tmp_path: Path,
) -> None:
    store = _crashed_at_57(tmp_path)

    @suggestor(name="counter")
    def other(ctx: Context) -> list[Proposal]:  # not deterministic: other content
        return [Proposal("n", 1000 + ctx.count("n"))]

    engine = Engine(budget=Budget(max_cycles=80), store=store, checkpoint_every=10)
    result = engine.register(other).resume_run("crash")
    assert isinstance(result.stop_reason, Error)
    assert result.stop_reason.error_category == ErrorCategory.STORAGE
    assert "fact id a second time" in result.stop_reason.message
    assert "n#51" in result.stop_reason.message  # the first fact replayed (cycle 51)
    promoted = [e.payload for e in store.events("crash", kinds=["fact_promoted"])]
    ids = [p["id"] for p in promoted]
    assert len(ids) == len(set(ids))  # no fact recorded twice
    assert {p["id"]: p["content"] for p in promoted}["n#51"] == 51  # as first recorded


class _FailingFinalWrite(SqlRunStore):
    """A store whose final write with a checkpoint fails (as SQLite's "string or
    blob too big" did for a 12.7M-event run)."""

    def finish_run(self, run_id: str, events: Any, outcome: Any, checkpoint: Any = None) -> None:
        if checkpoint is not None:
            raise StoreError("string or blob too big")
        super().finish_run(run_id, events, outcome, checkpoint)


def test_a_failing_final_write_still_records_the_stop(tmp_path: Path) -> None:
    opened = open_store(str(tmp_path / "fail.db"))
    store = _FailingFinalWrite(opened.url)
    store.check_key()
    engine = Engine(budget=Budget(max_cycles=5), store=store).register(counter)
    result = engine.run({"n": [0]}, run_id="fail")
    assert isinstance(result.stop_reason, Error)
    assert result.stop_reason.error_category == ErrorCategory.STORAGE
    assert "string or blob too big" in result.stop_reason.message
    assert result.context.count("n") == 6  # the facts are kept
    row = store.run("fail")
    assert row.status == "stopped" and row.kind == "error"
    assert (row.cycles, row.facts_count) == (5, 6)
    assert store.verify("fail").ok


def test_each_periodic_checkpoint_folds_only_the_chunks_written_since_the_last(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long run's checkpoints cost what their own cycles wrote, not the whole run
    so far: the digest chain of the fact chunks is folded on from the last one (a
    run of C cycles folds about C chunk digests, not C²/2 / checkpoint_every), and
    the checkpoints it leaves still resume and verify."""
    folds = 0
    fold = audit.trail._checkpoints.fold_digest

    def counted(digest: str, chunk: str) -> str:
        nonlocal folds
        folds += 1
        return fold(digest, chunk)

    monkeypatch.setattr(audit.trail._checkpoints, "fold_digest", counted)
    store = open_store(url)

    def make() -> Engine:
        gate = require_approval(when=lambda p, c: p.key == "n" and p.content == 300)
        engine = Engine(
            budget=Budget(max_cycles=320), gates=[gate], store=store, checkpoint_every=10
        )
        return engine.register(counter)

    first = make().run({"n": [0]}, run_id="long")
    assert isinstance(first.stop_reason, HitlGatePending)
    assert len(store.events("long", kinds=["checkpoint_saved"])) == 29
    # one fact (so about one chunk) per cycle; folding from the start each time: ~4,600
    assert folds <= 2 * 300, folds
    assert not store.chunk_folds  # forgotten once the run paused
    result = make().resume(first.stop_reason.gate_id, GateDecision.approve(by="alice"))
    assert isinstance(result.stop_reason, CycleBudgetExhausted)
    assert [f.content for f in result.context.get("n")] == list(range(321))
    assert store.verify("long").ok
    store.close()


def test_a_chunk_fold_of_a_transaction_that_rolled_back_is_not_kept(tmp_path: Path) -> None:
    """What a transaction folded is kept only once it commits: a rolled-back one (its
    chunks gone with it) leaves nothing for the next checkpoint to fold on from."""
    store = open_store(str(tmp_path / "rollback.db"))
    gate = require_approval(when=lambda p, c: p.key == "n" and p.content == 20)
    engine = Engine(budget=Budget(max_cycles=30), gates=[gate], store=store)
    engine.register(counter).run({"n": [0]}, run_id="rb")
    with pytest.raises(RuntimeError), store.transaction() as conn:
        assert audit.trail._checkpoints.chunks_digest(store, conn, "rb", 20)
        raise RuntimeError("rolled back")
    assert "rb" not in store.chunk_folds
    with store.transaction() as conn:
        audit.trail._checkpoints.chunks_digest(store, conn, "rb", 20)
    assert store.chunk_folds["rb"][0] == 20
    store.close()
