"""Runs survive the loss of a whole host (issue 42): simulated hosts on this machine
(tests/hosts.py: PID and UTS namespaces, each with its hostname and its
``converge worker``), one store and RabbitMQ shared.

Each fault, ``CONVERGE_HOST_TRIALS`` trials (10), mid-run: the host holding the run
killed whole (every process of its namespace SIGKILLed); frozen past its lease
(SIGSTOP) then thawed once the run finished elsewhere (its late writes refused,
nothing recorded, its lease not renewed); one host's clock an hour ahead and the
other's an hour behind (tests/hosts.py SKEW), the holder killed; the broker's
connections dropped and brought back (a proxy: the machine's RabbitMQ is shared).
Each trial: the run finishes within lease + 10 s of the fault (on another host,
but for the broker fault),
with the facts, facts root and stop of an uninterrupted run, no fact twice;
``verify --all`` ok at the end. PostgreSQL runs every fault; one shared SQLite
file the kill (a frozen process can hold SQLite's file lock, which has no lease,
and SQLite's clock is its host's). With ``CONVERGE_RECOVERY_LOG`` each trial's
times are appended there (one JSON line: docs/performance.md, R2).
"""

from __future__ import annotations

import json
import os
import random
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from sqlalchemy import text

from audit import open_store
from audit.store import SqlRunStore
from audit.testing import pg_schema, pg_unreachable_reason
from converge.jobs import load_job
from converge.service import submit_run
from tests.faultfixtures import RunSnapshot, differences, snapshot
from tests.hosts import BrokerProxy, Host, hosts_unavailable, wait_ready
from tests.servicefixtures import beat_job, reference, until
from tests.workerfixtures import BROKER, services_unreachable

TRIALS = int(os.environ.get("CONVERGE_HOST_TRIALS", "10"))
LEASE_S = 2.0
STEPS, SLEEP_MS = 12, 200
BOUND_S = LEASE_S + 10.0
"""The longest a run may take, after the fault, to finish elsewhere."""


def _require(*reasons: str | None) -> None:
    """Skip (saying why), or fail under CI, when something the hosts need is missing."""
    for reason in reasons:
        if reason is not None:
            if os.environ.get("CI") and os.geteuid() == 0:
                pytest.fail(reason)
            print(f"simulated hosts not run: {reason}")
            pytest.skip(reason)


class Cluster:
    """Two hosts (``a``, ``b``) over ``db``, behind a broker proxy, on a queue of their own."""

    def __init__(self, db: str, logs: Path, skew: tuple[float, float] = (0.0, 0.0)) -> None:
        self.db, self.skew, self.logs = db, skew, logs
        self.queue = f"converge-hosts-{uuid.uuid4().hex[:10]}"
        self.proxy = BrokerProxy()
        self.spawned = 1
        self.hosts = {n: self._host(n) for n in ("a", "b")}
        self.store: SqlRunStore = open_store(db)

    def _host(self, name: str) -> Host:
        skew = self.skew[0 if name.startswith("a") else 1]
        return Host(
            f"host-{name}",
            db=self.db,
            queue=self.queue,
            broker=self.proxy.url,
            lease_s=LEASE_S,
            skew=skew,
            logs=self.logs,
        ).start()

    def ready(self) -> None:
        wait_ready([h.node for h in self.hosts.values()])

    def respawn(self, host: Host) -> None:
        """A new host in place of ``host``, under a name of its own (``host-a2``...):
        where a run finished is told apart from the host that failed."""
        self.spawned += 1
        place = host.name.removeprefix("host-")[0]
        self.hosts[place] = self._host(f"{place}{self.spawned}")

    def holder(self, run_id: str) -> Host | None:
        row = self.store.run(run_id)
        if row.status != "running" or row.lease_holder is None:
            return None
        found = row.lease_holder.split("/")[0]
        return next((h for h in self.hosts.values() if h.name == found), None)

    def close(self) -> None:
        from kombu import Connection

        for host in self.hosts.values():
            host.stop()
        self.proxy.close()
        self.store.close()
        with Connection(BROKER, connect_timeout=3) as conn:
            conn.default_channel.queue_delete(self.queue)
            conn.default_channel.exchange_delete(self.queue)


@pytest.fixture(params=["pg", "sqlite"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _cluster(stack: ExitStack, kind: str, tmp_path: Path, skew: tuple[float, float]) -> Cluster:
    _require(hosts_unavailable(), services_unreachable())
    if kind == "pg":
        _require(pg_unreachable_reason())
        db = stack.enter_context(pg_schema("converge_hosts"))
    else:
        db = str(tmp_path / "shared.db")
    cluster = Cluster(db, tmp_path, skew)
    stack.callback(cluster.close)
    cluster.ready()
    return cluster


Fault = Callable[[Cluster, Host], Callable[[], None]]
"""Applies a fault to the host holding the run; returns what ends it after the stop."""


def _kill(cluster: Cluster, host: Host) -> Callable[[], None]:
    host.kill()
    # its successor starts now, beside the run's recovery, not after it
    cluster.respawn(host)
    return lambda: None


def _freeze(cluster: Cluster, host: Host) -> Callable[[], None]:
    host.freeze()
    return host.thaw


def _broker(cluster: Cluster, host: Host) -> Callable[[], None]:
    cluster.proxy.drop()
    time.sleep(1.0)  # the broker away for a second, then back
    cluster.proxy.restore()
    return lambda: None


def _trials(cluster: Cluster, fault: Fault, name: str, want: tuple[RunSnapshot, Path]) -> list[str]:
    rng = random.Random(42)
    wanted, job_file = want
    job = load_job(job_file)
    failures: list[str] = []
    from converge.workers import CeleryRunQueue

    runs = CeleryRunQueue(BROKER, cluster.queue)
    try:
        for trial in range(TRIALS):
            cluster.ready()
            run_id = submit_run(job, cluster.store, runs)
            at_seq = rng.randrange(wanted.last_seq // 4, wanted.last_seq * 2 // 3)

            def mid_run(run_id: str = run_id, at_seq: int = at_seq) -> Host | None:
                host = cluster.holder(run_id)
                return host if host and cluster.store.run(run_id).last_seq >= at_seq else None

            held: Host = until(mid_run, timeout=60, what=f"run {run_id} mid-run on a host")
            t0 = time.monotonic()
            after = fault(cluster, held)
            until(lambda r=run_id: _stopped(cluster.store, r), timeout=60, every=0.02)
            done = time.monotonic() - t0
            after()
            row = cluster.store.run(run_id)
            if name == "freeze":  # the thawed host: a lease long for its late writes
                time.sleep(LEASE_S + 1.0)
            found = differences(snapshot(cluster.db, run_id), wanted)
            if name != "broker" and row.hostname == held.name:
                found.append(f"finished on {row.hostname}, the host that failed")
            if done > BOUND_S:
                found.append(f"finished {done:.1f} s after the fault (bound {BOUND_S} s)")
            if name == "freeze" and cluster.store.run(run_id).last_seq != row.last_seq:
                found.append("the thawed host wrote to the run")
            found += _lease_left(cluster.store, run_id)
            _record(name, cluster, trial, done)
            if found:
                failures.append(f"{name} trial {trial} (seq {at_seq}): {found}")
    finally:
        runs.close()
    return failures


def _stopped(store: SqlRunStore, run_id: str) -> bool:
    return store.run(run_id).status == "stopped"


def _lease_left(store: SqlRunStore, run_id: str) -> list[str]:
    with store.transaction(write=False) as conn:
        left = conn.execute(
            text("SELECT holder FROM run_leases WHERE run_id = :r"), {"r": run_id}
        ).all()
    return [f"a lease left behind: {left}"] if left else []


def _record(name: str, cluster: Cluster, trial: int, done: float) -> None:
    log = os.environ.get("CONVERGE_RECOVERY_LOG")
    if log:
        kind = "pg" if "://" in cluster.db else "sqlite"
        line = {"fault": name, "store": kind, "trial": trial, "finished_s": round(done, 3)}
        with open(log, "a") as fh:
            fh.write(json.dumps(line) + "\n")


def _check_all(cluster: Cluster, failures: list[str]) -> None:
    bad = [f"{r.run_id}: {r}" for r in cluster.store.verify_all() if not r.ok]
    assert failures == []
    assert bad == []


@pytest.fixture
def want(tmp_path: Path) -> tuple[RunSnapshot, Path]:
    """The uninterrupted run (in this process) and its job file."""
    job_file = beat_job(tmp_path / "beat.yaml", steps=STEPS, sleep_ms=SLEEP_MS)
    made = reference(job_file, tmp_path)
    assert made.kind == "converged"
    return made, job_file


@pytest.fixture
def stack() -> Iterator[ExitStack]:
    with ExitStack() as opened:
        yield opened


def test_a_host_killed_whole_mid_run(
    backend: str, tmp_path: Path, want: tuple[RunSnapshot, Path], stack: ExitStack
) -> None:
    cluster = _cluster(stack, backend, tmp_path, (0.0, 0.0))
    _check_all(cluster, _trials(cluster, _kill, "kill", want))


@pytest.mark.parametrize(
    ("skew", "fault", "name"),
    [
        pytest.param((0.0, 0.0), _freeze, "freeze", id="a-host-frozen-past-its-lease-then-thawed"),
        pytest.param((3600.0, -3600.0), _kill, "skew", id="hosts-an-hour-ahead-and-behind"),
        pytest.param((0.0, 0.0), _broker, "broker", id="the-broker-restarted-mid-run"),
    ],
)
def test_a_fault_on_postgresql(
    tmp_path: Path,
    want: tuple[RunSnapshot, Path],
    stack: ExitStack,
    skew: tuple[float, float],
    fault: Fault,
    name: str,
) -> None:
    # the host holding the run killed under skewed clocks (one an hour ahead, the
    # other behind); frozen; or the broker's connections dropped
    cluster = _cluster(stack, "pg", tmp_path, skew)
    _check_all(cluster, _trials(cluster, fault, name, want))
