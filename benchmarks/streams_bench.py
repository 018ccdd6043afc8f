"""L1 at scale (issue 58): many people watching runs live, on SQLite and PostgreSQL.

- *idle*: :data:`IDLE_RUNS` runs paused at their gates, one stream each, through a
  real ``converge serve``: the server's CPU (its process's user + system time,
  ``/proc/PID/stat``) over :data:`IDLE_WINDOWS` windows of :data:`WINDOW_S`, as a
  share of one core (target < 0.05);
- *busy*: :data:`BUSY_STREAMS` streams of one run promoting :data:`FACTS_PER_S`
  facts a second (driven here with ``Engine.stream``): the p99 of ``GET /api/runs``
  asked meanwhile (target < 100 ms) and, on :data:`PROBES` of the streams, the p95
  from an event's commit to its arrival (target < 50 ms), over :data:`BUSY_ROUNDS`
  runs::

    python -m benchmarks --only l1s --no-langgraph
"""

from __future__ import annotations

import math
import os
import statistics
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from benchmarks.harness import Row, Stat
from benchmarks.live_bench import _serve, note_arrivals
from benchmarks.session import Suite, log
from engine import Budget, Context, Engine, Proposal, RunResult, suggestor
from engine.events import RunEvent

IDLE_RUNS = 100
IDLE_WINDOWS = 5
WINDOW_S = 4.0
IDLE_TARGET_CORES = 0.05
BUSY_STREAMS = 200
PROBES = 10
FACTS_PER_S = 100
FACTS_PER_CYCLE = 10
BUSY_CYCLES = 60  # 6 s a run
BUSY_ROUNDS = 5
RUNS_P99_TARGET_MS = 100.0
LAG_P95_TARGET_MS = 50.0
TOKENS = 8  # streams spread over tokens: 25 each, under the per-token cap
TICK = os.sysconf("SC_CLK_TCK")


@suggestor(name="flow", dependencies=["n"])
def flow(ctx: Context) -> list[Proposal]:
    """:data:`FACTS_PER_CYCLE` new facts every ``FACTS_PER_CYCLE / FACTS_PER_S`` s."""
    time.sleep(FACTS_PER_CYCLE / FACTS_PER_S)
    top = max(f.content for f in ctx.get("n"))
    return [Proposal("n", top + i) for i in range(1, FACTS_PER_CYCLE + 1)]


@suggestor(name="ask", dependencies=["seed"])
def ask(ctx: Context) -> list[Proposal]:
    """A proposal a person must decide: the idle runs wait on it."""
    return [Proposal("license.unknown", {"name": "x"})]


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


class Streams:
    """Streams held open in threads: ``arrived[i][seq]`` the arrival time at probe i;
    the others only drain their bytes."""

    def __init__(self) -> None:
        self.arrived: list[dict[int, float]] = []
        self.ready = threading.Semaphore(0)
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []

    def open(self, url: str, token: str, probe: bool, until: str | None = None) -> None:
        arrived: dict[int, float] = {}
        self.arrived.append(arrived)

        def read() -> None:
            try:
                follow()
            except httpx.HTTPError:
                return  # the server went away at the end of the measurement

        def follow() -> None:
            headers = {"Authorization": f"Bearer {token}"}
            with httpx.stream("GET", url, headers=headers, timeout=300) as answer:
                self.ready.release()
                if not probe:
                    for _ in answer.iter_raw():
                        if self.stop.is_set():
                            return
                    return
                note_arrivals(answer.iter_lines(), arrived, self.stop)

        t = threading.Thread(target=read, daemon=True)
        t.start()
        self.threads.append(t)

    def wait_ready(self, n: int) -> None:
        for _ in range(n):
            self.ready.acquire(timeout=120)

    def close(self) -> None:
        self.stop.set()


@contextmanager
def _server(url: str) -> Iterator[tuple[int, str]]:
    proc, base = _serve(url)
    try:
        yield proc.pid, base
    finally:
        proc.terminate()
        proc.wait(30)


def _tokens(url: str) -> list[str]:
    from audit import open_store
    from audit.people import add_token

    store = open_store(url)
    try:
        return [add_token(store, f"watcher{i}", "viewer") for i in range(TOKENS)]
    finally:
        store.close()


def _paused_runs(url: str, n: int) -> list[str]:
    from audit import open_store
    from converge.jobs import parse_job

    job = parse_job(
        "name: idle\nsuggestors: [benchmarks.streams_bench:ask]\n"
        "gates: [{hitl: {keys: [license.unknown], summary: wait}}]\ninitial: {seed: [1]}\n",
        "idle.yaml",
    )
    store = open_store(url)
    try:
        return [job.build_engine(store).run(job.spec.initial).run_id for _ in range(n)]
    finally:
        store.close()


def _shares(pid: int) -> list[float]:
    shares = []
    for _ in range(IDLE_WINDOWS):
        cpu0, t0 = _cpu_s(pid), time.monotonic()
        time.sleep(WINDOW_S)
        shares.append((_cpu_s(pid) - cpu0) / (time.monotonic() - t0))
    return shares


def idle_cores(url: str) -> tuple[list[float], list[float]]:
    """The server's CPU share per window with no stream (its floor: the sequencer,
    the deadlines, the pool), then with :data:`IDLE_RUNS` idle streams."""
    runs, tokens = _paused_runs(url, IDLE_RUNS), _tokens(url)
    with _server(url) as (pid, base):
        time.sleep(2.0)
        floor = _shares(pid)
        streams = Streams()
        for i, run_id in enumerate(runs):
            streams.open(f"{base}/api/runs/{run_id}/events", tokens[i % TOKENS], probe=False)
        streams.wait_ready(IDLE_RUNS)
        time.sleep(2.0)  # the backlogs sent: idle from here
        shares = _shares(pid)
        streams.close()
    return floor, shares


def _busy_round(url: str, base: str, tokens: list[str], n: int) -> tuple[list[float], list[float]]:
    """One run watched by :data:`BUSY_STREAMS`: (GET /api/runs latencies, lags), s."""
    from audit import open_store

    store = open_store(url)
    engine = Engine(budget=Budget(max_cycles=BUSY_CYCLES), store=store).register(flow)
    stream = engine.stream({"n": [0]}, run_id=f"busy-{n}")
    first = next(stream)
    assert isinstance(first, RunEvent) and first.seq is not None
    streams = Streams()
    url_events = f"{base}/api/runs/busy-{n}/events"
    for i in range(BUSY_STREAMS):
        streams.open(url_events, tokens[i % TOKENS], probe=i < PROBES)
    streams.wait_ready(BUSY_STREAMS)
    latencies: list[float] = []
    done = threading.Event()

    def ask() -> None:
        with httpx.Client(headers={"Authorization": f"Bearer {tokens[0]}"}) as client:
            while not done.is_set():
                t0 = time.perf_counter()
                try:
                    client.get(f"{base}/api/runs", timeout=60)
                except httpx.HTTPError:
                    latencies.append(60.0)  # a failure counts as the slowest answer
                    continue
                latencies.append(time.perf_counter() - t0)

    asker = threading.Thread(target=ask, daemon=True)
    asker.start()
    committed: dict[int, float] = {}
    for item in stream:
        if isinstance(item, RunEvent) and item.seq is not None:
            committed[item.seq] = time.time()
        elif isinstance(item, RunResult):
            break
    time.sleep(1.0)  # the last events reach the probes
    done.set()
    asker.join(60)
    streams.close()
    store.close()
    lags = [a[s] - t for a in streams.arrived[:PROBES] for s, t in committed.items() if s in a]
    return latencies, lags


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(len(ordered) * q) - 1)]  # nearest rank


def busy(url: str) -> tuple[list[float], list[float]]:
    """Per round: the p99 of GET /api/runs and the p95 lag (ms)."""
    tokens = _tokens(url)
    p99s, p95s = [], []
    with _server(url) as (_pid, base):
        for n in range(BUSY_ROUNDS):
            latencies, lags = _busy_round(url, base, tokens, n)
            p99s.append(_p(latencies, 0.99) * 1000)
            p95s.append(_p(lags, 0.95) * 1000)
            log(f"    round {n}: GET /api/runs p99 {p99s[-1]:.1f} ms, lag p95 {p95s[-1]:.1f} ms")
    return p99s, p95s


@contextmanager
def _stores(workdir: str) -> Iterator[Iterator[tuple[str, str]]]:
    from audit.testing import pg_schema, pg_unreachable_reason

    def each() -> Iterator[tuple[str, str]]:
        yield "SQLite", str(Path(workdir) / f"l1s-{time.monotonic_ns()}.db")
        if pg_unreachable_reason() is None:
            with pg_schema("converge_l1s") as url:
                yield "PostgreSQL", url

    yield each()


def _stat(values: list[float]) -> Stat:
    return Stat(statistics.median(values), min(values), max(values))


def run_l1_streams(suite: Suite) -> None:
    """The L1 rows at scale: idle streams' CPU, and a busy run's many watchers (only
    with ``--only l1s``: minutes)."""
    if suite.only is None or "l1s" not in suite.only:
        log("  L1 at scale: skipped (python -m benchmarks --only l1s)")
        return
    os.environ.setdefault("PYTHONPATH", str(Path(__file__).resolve().parent.parent))
    for kind in ("idle", "busy"):
        with _stores(suite.workdir) as stores:
            for name, url in stores:
                log(f"  L1 {kind}: {name}")
                if kind == "idle":
                    floor, shares = idle_cores(url)
                    suite.add(
                        Row(
                            f"L1 {IDLE_RUNS} idle streams, server CPU",
                            name,
                            "cores",
                            False,
                            _stat(shares),
                            target=("<=", IDLE_TARGET_CORES),
                            limit=_stat(floor),
                            limit_name="the same server with no stream",
                            note=f"{IDLE_WINDOWS} windows of {WINDOW_S:.0f} s",
                        ),
                        None,
                    )
                    continue
                p99s, p95s = busy(url)
                for label, values, target in (
                    ("GET /api/runs p99", p99s, RUNS_P99_TARGET_MS),
                    ("commit → client p95", p95s, LAG_P95_TARGET_MS),
                ):
                    suite.add(
                        Row(
                            f"L1 {BUSY_STREAMS} streams of a {FACTS_PER_S}-facts/s run: {label}",
                            name,
                            "ms",
                            False,
                            _stat(values),
                            target=("<=", target),
                            note=f"medians of {BUSY_ROUNDS} runs of {BUSY_CYCLES} cycles",
                        ),
                        None,
                    )
