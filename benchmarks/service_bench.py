"""S1: approvals that answer at once while the run's next leg is long (issues 22, 46).

50 runs paused at a HITL gate, whose next leg takes 5 s (a suggestor sleeping, as
a long model call would), are approved one after the other through the HTTP API
of a real ``converge serve`` process, after one untimed warm-up approval: the
answer time of each approval (its p50 and p99; target p99 < 100 ms, whatever the
leg's length), and the time from the first timed approval until all the runs
reached their stops. On SQLite and on PostgreSQL
(``$CONVERGE_TEST_PG_URL``; skipped with a note when it does not answer), each
with the resumes sent to ``converge worker`` processes on RabbitMQ (2 nodes x 5
processes; ``$CONVERGE_TEST_BROKER``, the machine's by default, skipped with a
note when it does not answer), and without a broker, resumed in the server's own
pool (``--pool 10``); the ideal for the stops is 50 x 5 s / 10 slots. Each setup
is measured :data:`S1_REPEATS` times from scratch (a fresh store, server and
workers: the cold start is part of every repetition); the rows give the medians.
The raw limit is measured in the same run, right after each approval: a no-op
HTTP round trip to the same server (``GET /api/openapi.json``, cached) plus one
``INSERT`` + ``COMMIT`` on the same store. It takes several minutes, so it runs
only when named:

``python -m benchmarks --only s1 --no-langgraph``

Where the PostgreSQL tail came from (issue 46; each step of the answer timed in
the server with ``perf_counter``, the workers' resumes timed up to their leg;
busy 2-core machine, load average 8-10): the slow answers (130-190 ms against
~80 ms for the others) were the first 14, each overlapping the *first* resume of
one or more worker processes. A worker process's first resume took 270-780 ms
to reach its leg against ~100 ms for the next ones: it imported the job's
modules, checked the run service's tables (a write transaction under an
advisory lock) and, on PostgreSQL, its fresh backends loaded the catalog entries
of every table they touched; ten processes did it at once on the two cores the
server answered from, and each of the answer's ~25 round trips to PostgreSQL
waited for its backend to be scheduled among them (SQLite has no backend to
wait for). Publishing the resume cost 1-6 ms, once 74 ms (a broker round trip
stalled). Now the worker imports the jobs of the store's paused and queued runs
before its processes fork (``converge.service.preload_jobs``), each process
readies its store as it starts (``audit.run_queue.warm_store``), and the server
publishes from a thread of its own on a connection made at start
(``converge.service.BackgroundQueue``): the answer waits for neither.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from benchmarks.harness import Row, Stat
from benchmarks.session import Suite, log
from engine import Context, Proposal, suggestor

S1_APPROVALS = 50
S1_LEG_S = 5.0  # seconds the leg after each approval takes
S1_NODES = 2
S1_PROCESSES = 5  # per worker node
S1_POOL = S1_NODES * S1_PROCESSES  # the server's own pool, without a broker: as many slots
S1_TARGET_MS = 100.0
S1_REPEATS = int(os.environ.get("CONVERGE_S1_REPEATS", "5"))  # fresh setups per row
BROKER = os.environ.get("CONVERGE_TEST_BROKER") or "amqp://guest:guest@127.0.0.1:5672//"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
START_S = 60.0  # a server or worker not answering after this failed to start


@suggestor(name="find", dependencies=["seed"])
def find(ctx: Context) -> list[Proposal]:
    """Cycle 1: a package of unknown license (the gate holds it for a person)."""
    return [Proposal("license.unknown", {"name": f"pkg-{ctx.get('seed')[0].content}"})]


@suggestor(name="long_leg", dependencies=["license.unknown"])
def long_leg(ctx: Context) -> list[Proposal]:
    """After the approval: :data:`S1_LEG_S` seconds of work, then one fact."""
    time.sleep(S1_LEG_S)
    return [Proposal("done", ctx.get("license.unknown")[-1].content)]


def _job_file(workdir: str) -> Path:
    path = Path(workdir) / "s1-job.yaml"
    job = {
        "name": "s1-long-leg",
        "suggestors": ["benchmarks.service_bench:find", "benchmarks.service_bench:long_leg"],
        "budget": {"max_cycles": 10},
        "gates": [{"hitl": {"keys": ["license.unknown"], "summary": "Classify {content[name]}"}}],
        "initial": {"seed": [1]},
    }
    path.write_text(json.dumps(job))  # JSON is YAML
    return path


def _paused_runs(db: str, workdir: str) -> tuple[list[str], str]:
    """``S1_APPROVALS`` runs paused at their gate in a fresh store; their gate ids and
    an approver's API token."""
    from audit import open_store
    from audit.people import add_token
    from converge.jobs import load_job

    job = load_job(_job_file(workdir))
    store = open_store(db)
    try:
        for _ in range(S1_APPROVALS + 1):  # the first approval warms the connections up
            job.build_engine(store).run(job.spec.initial or None)
        gates = [g.gate_id for g in store.gates(pending=True)]
        # the raw limit's table, made before the server starts: its first write then
        # never waits for the server's start (SQLite: "database is locked")
        _floor_table().create(store.sql_engine, checkfirst=True)
        return gates, add_token(store, "bench")
    finally:
        store.close()


def _spawn(args: list[str], db: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "converge.cli", *args, "--db", db],
        cwd=REPO,
        # the broker is named on the command line, or there is none
        env={k: v for k, v in os.environ.items() if k != "CONVERGE_BROKER"},
        start_new_session=True,  # its own process group: stopped as one
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        with suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=10)


@contextmanager
def _workers(db: str) -> Iterator[str]:
    """``S1_NODES`` ``converge worker`` nodes on a queue of their own; its name."""
    from kombu import Connection

    from converge.workers import celery_app

    queue = f"converge-bench-s1-{uuid.uuid4().hex[:10]}"
    names = [f"{queue}-{i}@localhost" for i in range(S1_NODES)]
    command = ["worker", "--broker", BROKER, "--queue", queue, "--concurrency", str(S1_PROCESSES)]
    procs = [_spawn([*command, "--hostname", name], db) for name in names]
    app = celery_app(BROKER, None)
    try:
        deadline = time.monotonic() + START_S
        while {n for r in app.control.ping(destination=names, timeout=0.5) for n in r} < set(names):
            if time.monotonic() > deadline:
                raise RuntimeError("the benchmark's workers did not start")
        yield queue
    finally:
        app.close()
        _stop(procs)
        with Connection(BROKER, connect_timeout=3) as conn:
            conn.default_channel.queue_delete(queue)
            conn.default_channel.exchange_delete(queue)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def _server(db: str, token: str, extra: list[str]) -> Iterator[Any]:
    """``converge serve`` on a free port; an ``httpx.Client`` on it, authenticated."""
    import httpx

    port = _free_port()
    proc = _spawn(["serve", "--port", str(port), *extra], db)
    client = httpx.Client(
        base_url=f"http://127.0.0.1:{port}",
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    try:
        deadline = time.monotonic() + START_S
        while True:
            try:
                if client.get("/api/gates").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("the benchmark's converge serve did not start")
            time.sleep(0.1)
        yield client
    finally:
        client.close()
        _stop([proc])


def _approve(client: Any, gate_id: str) -> None:
    reply = client.post(f"/api/gates/{gate_id}/decision", json={"approved": True})
    if reply.status_code != 202:
        raise RuntimeError(f"approval of {gate_id} answered {reply.status_code}: {reply.text}")


def _floor(client: Any, engine: Any, table: Any) -> float:
    """One no-op HTTP round trip to the server plus one INSERT + COMMIT on the store
    (seconds): the least an answer that records something can take, right now."""
    t0 = time.perf_counter()
    if client.get("/api/openapi.json").status_code != 200:
        raise RuntimeError("the no-op route did not answer 200")
    with engine.begin() as conn:
        conn.execute(table.insert().values(at=time.time()))
    return time.perf_counter() - t0


def _floor_table() -> Any:
    """The table the raw limit inserts into (:func:`_floor`)."""
    from sqlalchemy import Column, Double, Integer, MetaData, Table

    return Table(
        "s1_floor", MetaData(), Column("id", Integer, primary_key=True), Column("at", Double)
    )


def _approve_all(db: str, gates: list[str], client: Any) -> tuple[list[float], list[float], float]:
    """Approve every gate through the API, one after the other (the first one
    untimed, a warm-up), each followed by the raw limit (:func:`_floor`); each timed
    answer's time and each limit's (seconds), and the time from the first timed
    approval until every run stopped."""
    from audit import open_store

    answers: list[float] = []
    floors: list[float] = []
    store = open_store(db)
    table = _floor_table()
    try:
        table.create(store.sql_engine, checkfirst=True)  # made with the runs: no write here
        warmup, *timed = gates  # the server's first decision opens its broker connection
        _approve(client, warmup)
        _floor(client, store.sql_engine, table)
        started = time.perf_counter()
        for gate_id in timed:
            t0 = time.perf_counter()
            _approve(client, gate_id)
            answers.append(time.perf_counter() - t0)
            floors.append(_floor(client, store.sql_engine, table))
        deadline = time.monotonic() + S1_APPROVALS * S1_LEG_S + START_S
        while any(r.status != "stopped" for r in store.runs(limit=S1_APPROVALS + 2)):
            if time.monotonic() > deadline:
                raise RuntimeError("the approved runs did not all stop")
            time.sleep(0.05)
        return answers, floors, time.perf_counter() - started
    finally:
        store.close()


def _p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[98]


def _ms(values: list[float]) -> Stat:
    """Median and range (ms) of per-repetition figures given in seconds."""
    ms = [v * 1000 for v in values]
    return Stat(statistics.median(ms), min(ms), max(ms))


def _rows(suite: Suite, size: str, reps: list[tuple[list[float], list[float], float]]) -> None:
    """The rows of one setup from its repetitions ``(answers, floors, all_stopped)``."""
    p50s = [statistics.median(a) for a, _, _ in reps]
    p99s = [_p99(a) for a, _, _ in reps]
    floor50s = [statistics.median(f) for _, f, _ in reps]
    floor99s = [_p99(f) for _, f, _ in reps]
    p50, p99 = _ms(p50s), _ms(p99s)
    verdict = "met" if p99.median < S1_TARGET_MS else "NOT met"
    n = f"medians of {len(reps)}"
    limit = "no-op HTTP round trip + INSERT/COMMIT, p99"
    suite.add(
        Row(
            "S1 approval answer p99 (HTTP API, 202)",
            size,
            "ms",
            False,
            p99,
            target=("<=", S1_TARGET_MS),
            limit=_ms(floor99s),
            limit_name=limit,
            note=f"{n}: p50 {p50.median:.1f} ms (limit p50 {_ms(floor50s).median:.1f}), "
            f"p99 {p99.median:.1f} ms (target < {S1_TARGET_MS:.0f} ms: {verdict})",
        ),
        None,
    )
    ideal = S1_APPROVALS * S1_LEG_S / S1_POOL
    stopped = [s for _, _, s in reps]
    suite.add(
        Row(
            "S1 all approved runs stopped",
            size,
            "s",
            False,
            Stat(statistics.median(stopped), min(stopped), max(stopped)),
            limit=Stat(ideal, ideal, ideal),
            limit_name=f"ideal {S1_APPROVALS} x {S1_LEG_S:.0f} s / {S1_POOL} slots",
            note=f"from the first timed approval; {n}",
        ),
        None,
    )


def _broker_unreachable() -> str | None:
    try:
        from kombu import Connection

        with Connection(BROKER, connect_timeout=3) as conn:
            conn.ensure_connection(max_retries=1)
    except Exception as exc:
        return f"skipped: broker unreachable ({type(exc).__name__})"
    return None


@contextmanager
def _store(kind: str, workdir: str, name: str) -> Iterator[str | None]:
    """A fresh store of ``kind`` (its URL), or None when PostgreSQL is unreachable."""
    if kind == "SQLite":
        yield str(Path(workdir) / f"s1-{name}.db")
        return
    from audit.testing import pg_schema, pg_unreachable_reason

    if pg_unreachable_reason() is not None:
        yield None
        return
    with pg_schema("converge_bench_s1") as url:
        yield url


def _measure(suite: Suite, kind: str, name: str, where: str, extra: Any) -> None:
    """Approve the runs of a fresh ``kind`` store through a ``converge serve`` with the
    options ``extra(db)`` gives (a context manager), :data:`S1_REPEATS` times from
    scratch; add the two rows."""
    size = f"{S1_APPROVALS} approvals, {S1_LEG_S:.0f} s legs, {kind}, {where}"
    reps: list[tuple[list[float], list[float], float]] = []
    for rep in range(S1_REPEATS):
        with _store(kind, suite.workdir, f"{name}-{rep}") as db:
            if db is None:
                note = "skipped: PostgreSQL unreachable ($CONVERGE_TEST_PG_URL)"
                suite.rows.append(Row("S1 approvals", size, "ms", False, None, note=note))
                return
            gates, token = _paused_runs(db, suite.workdir)
            with extra(db) as options, _server(db, token, options) as client:
                log(
                    f"  S1 ({rep + 1}/{S1_REPEATS}): approving {len(gates)} runs on {kind}, {where}"
                )
                reps.append(_approve_all(db, gates, client))
                _log_phases(reps[-1][0])
    _rows(suite, size, reps)


def _log_phases(answers: list[float]) -> None:
    """Where the slow answers fall: those while the pool's slots first fill (a worker
    process starting for each, without a broker) against the later ones (ms)."""
    first, rest = answers[:S1_POOL], answers[S1_POOL:]
    if not first or not rest:
        return
    log(
        f"    answers while the {S1_POOL} slots first fill: median "
        f"{statistics.median(first) * 1000:.0f} ms, max {max(first) * 1000:.0f} ms; "
        f"after: median {statistics.median(rest) * 1000:.0f} ms, max {max(rest) * 1000:.0f} ms"
    )


@contextmanager
def _on_workers(db: str) -> Iterator[list[str]]:
    with _workers(db) as queue:
        yield ["--broker", BROKER, "--queue", queue]


@contextmanager
def _in_pool(db: str) -> Iterator[list[str]]:
    yield ["--pool", str(S1_POOL)]


def run_s1(suite: Suite) -> None:
    """The S1 rows, only when named (``--only s1``): on SQLite and PostgreSQL, resumed
    on workers, then in the server's pool."""
    if suite.only is None or "s1" not in suite.only:
        size = f"{S1_APPROVALS} approvals, {S1_LEG_S:.0f} s legs"
        note = "not in the default set (RabbitMQ, ~3 min): --only s1"
        suite.rows.append(Row("S1 approvals, long next leg", size, "ms", False, None, note=note))
        return
    skip = _broker_unreachable()
    for kind in ("SQLite", "PostgreSQL"):
        workers = f"on RabbitMQ, {S1_NODES}x{S1_PROCESSES} worker processes"
        if skip is None:
            _measure(suite, kind, "workers", workers, _on_workers)
        else:
            suite.rows.append(Row("S1 approvals", workers, "ms", False, None, note=skip))
        _measure(suite, kind, "pool", f"no broker, server pool of {S1_POOL}", _in_pool)
