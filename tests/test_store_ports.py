"""The ports through which a lower room of ``audit`` calls a higher one (issue 55).

``audit.writing`` lies beneath the store's state (``audit.core``), which lies beneath
the ledger (``audit.ledger``): neither may import the room above it, so each calls
up through a protocol the room above implements. Each test plugs a stand-in into
one port and shows the lower room working with it alone:

- ``audit.core.HeadLedger``: the write path hands every commit's new run head to
  the store's ``heads``, never to the ledger's sequencer directly;
- ``audit.writing._lease.Holding``: a ``LeaseKeeper`` renews leases in any store
  with transactions and claim epochs, and fences a run whose lease was taken over;
- ``audit.writing._timing.Runner``: closing a store stops whatever runs its
  ledger passes, through the store's ``ledger_timing``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Connection, create_engine, update

from audit import SqlRunStore, open_store
from audit.core import StoreCore
from audit.ledger import ledger_entries, pending_count
from audit.tables import METADATA, run_leases
from audit.writing import LOST, LeaseKeeper, grant
from engine import Budget, Context, Engine, Proposal, suggestor
from engine.store import AuditEvent, RunHeader

T0 = 1_800_000_000.0


@suggestor(name="count", dependencies=["n"])
def count(ctx: Context) -> list[Proposal]:
    """The next number, a commit per cycle."""
    return [Proposal("n", ctx.get("n")[-1].content + 1)]


class RecordingHeads:
    """A stand-in ``HeadLedger``: the heads the write path hands it, in order."""

    def __init__(self) -> None:
        self.heads: list[tuple[str, int, str]] = []

    def record(
        self, store: StoreCore, conn: Connection, run_id: str, last_seq: int, head: str
    ) -> None:
        self.heads.append((run_id, last_seq, head))

    def recorded(self, store: StoreCore, run_id: str, last_seq: int, head: str) -> None:
        self.heads.append((run_id, last_seq, head))


def test_the_write_path_hands_each_new_head_to_the_stores_head_ledger(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "ports.db"))
    heads = RecordingHeads()
    store.heads = heads
    try:
        Engine(budget=Budget(max_cycles=3), store=store).register(count).run(
            {"n": [0]}, run_id="r1"
        )
        row = store.run("r1")
        assert heads.heads[-1] == ("r1", row.last_seq, row.head_hash)
        assert [seq for _, seq, _ in heads.heads] == sorted(seq for _, seq, _ in heads.heads)
        # the ledger saw none of them: the write path reaches it only through the port
        assert ledger_entries(store) == []
        assert pending_count(store) == 0
    finally:
        store.close()


class LeaseTable:
    """A stand-in ``Holding``: a bare database holding ``run_leases`` and the claim
    epochs of this process, with no audit store around it."""

    def __init__(self, path: Path) -> None:
        self.engine = create_engine(f"sqlite:///{path}")
        METADATA.create_all(self.engine, tables=[run_leases])
        self.claim_epochs: dict[str, int] = {}

    @contextmanager
    def transaction(self, *, write: bool = True, settle: bool = True) -> Iterator[Connection]:
        with self.engine.begin() as conn:
            yield conn


def test_a_lease_keeper_fences_a_run_whose_lease_another_took(tmp_path: Path) -> None:
    leases = LeaseTable(tmp_path / "leases.db")
    keeper = LeaseKeeper(leases, 30.0)
    with leases.transaction() as conn:
        grant(conn, "mine", 1, 30.0, None)
        grant(conn, "taken", 1, 30.0, None)
    leases.claim_epochs.update(mine=1, taken=1)
    keeper.hold("mine", 1)
    keeper.hold("taken", 1)
    try:
        with leases.transaction() as conn:
            conn.execute(
                update(run_leases)
                .where(run_leases.c.run_id == "taken")
                .values(holder="host-b/4242/777", epoch=2)
            )
        assert keeper.renew() == ["taken"]
        assert keeper.held() == {"mine": 1}
        assert leases.claim_epochs == {"mine": 1, "taken": LOST}  # its writes refused
    finally:
        keeper.close()
        leases.engine.dispose()


class CountingRunner:
    """A stand-in ``Runner``: how often it was woken and stopped."""

    def __init__(self) -> None:
        self.woken = 0
        self.stopped = 0

    def wake(self) -> None:
        self.woken += 1

    def stop(self) -> None:
        self.stopped += 1


def test_closing_a_store_stops_the_runner_of_its_ledger_passes(tmp_path: Path) -> None:
    store: SqlRunStore = open_store(str(tmp_path / "runner.db"))
    store.start_run(RunHeader("r1", None, None, ("a",), T0), [])
    store.append_events("r1", [AuditEvent("cycle_started", 1, {}, T0 + 1)])
    runner = CountingRunner()
    store.ledger_timing.runner, store.ledger_timing.runner_pid = runner, os.getpid()
    store.close()
    assert runner.stopped == 1 and runner.woken == 0
    assert store.ledger_timing.runner is None
