"""L1: from an event's commit to its arrival at a Server-Sent Events client (issue 43).

A run of :data:`L1_CYCLES` cycles (one every :data:`L1_CYCLE_S`, as a run waiting
on a model would) is driven here with ``Engine.stream`` on a SQLite store; a real
``converge serve`` process over that store streams it (``GET /api/runs/{id}/events``)
to one client, then to :data:`L1_STREAMS` concurrent clients. An event's commit
time is when ``Engine.stream`` yields it (right after its batch's commit); its
arrival, when a client has read its ``data:`` line. The row gives the p50 and the
p95 of that lag over every event and client (target: p95 <= 100 ms)::

    python -m benchmarks --only l1 --no-langgraph
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from pathlib import Path

import httpx

from benchmarks.harness import Row, Stat
from benchmarks.session import Suite, log
from engine import Budget, Context, Engine, Proposal, RunResult, suggestor
from engine.events import RunEvent

L1_CYCLES = 60
L1_CYCLE_S = 0.02  # seconds each cycle's suggestor takes
L1_STREAMS = 20
L1_TARGET_MS = 100.0
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
START_S = 60.0


@suggestor(name="step", dependencies=["n"])
def step(ctx: Context) -> list[Proposal]:
    """One more number per cycle, after :data:`L1_CYCLE_S` of work."""
    time.sleep(L1_CYCLE_S)
    top = max(f.content for f in ctx.get("n"))
    return [Proposal("n", top + 1)]


def _serve(db: str) -> tuple[subprocess.Popen[str], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "converge.cli", "serve", "--port", str(port), "--db", db]
    env = {**os.environ, "PYTHONPATH": REPO}
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + START_S
    for line in proc.stdout:
        if "Uvicorn running on" in line:
            break
        if time.monotonic() > deadline:
            break
    return proc, f"http://127.0.0.1:{port}"


def note_arrivals(
    lines: Iterable[str], arrived: dict[int, float], stop: threading.Event | None = None
) -> None:
    """Read a server-sent event stream's ``lines``: when each event arrived (unix
    seconds) into ``arrived``, by its ``id``; returns at the stream's end or once
    ``stop`` is set."""
    seq = 0
    for line in lines:
        if line.startswith("id: "):
            seq = int(line[4:])
        elif line.startswith("data: "):
            arrived[seq] = time.time()
        if stop is not None and stop.is_set():
            return


def _client(url: str, token: str, arrived: dict[int, float], ready: threading.Event) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.stream("GET", url, headers=headers, timeout=120) as answer:
        ready.set()
        note_arrivals(answer.iter_lines(), arrived)


def _one(base: str, token: str, db: str, streams: int, run_id: str) -> list[float]:
    """Lags (seconds) of every event of one run at each of ``streams`` clients."""
    from audit import open_store

    store = open_store(db)
    engine = Engine(budget=Budget(max_cycles=L1_CYCLES), store=store).register(step)
    committed: dict[int, float] = {}
    # the run is recorded first, so that the clients can subscribe before it goes on
    stream = engine.stream({"n": [0]}, run_id=run_id)
    first = next(stream)
    assert isinstance(first, RunEvent) and first.seq is not None
    committed[first.seq] = time.time()
    url = f"{base}/api/runs/{run_id}/events"
    arrivals: list[dict[int, float]] = [{} for _ in range(streams)]
    readies = [threading.Event() for _ in range(streams)]
    threads = [
        threading.Thread(target=_client, args=(url, token, arrivals[i], readies[i]), daemon=True)
        for i in range(streams)
    ]
    for t in threads:
        t.start()
    for r in readies:
        r.wait(START_S)
    for item in stream:
        if isinstance(item, RunEvent) and item.seq is not None:
            committed[item.seq] = time.time()
        elif isinstance(item, RunResult):
            break
    for t in threads:
        t.join(120)
    store.close()
    # the events before the clients joined were sent from the backlog: not live
    live = [s for s in committed if s > first.seq]
    return [a[s] - committed[s] for a in arrivals for s in live if s in a]


def run_l1(suite: Suite) -> None:
    """The L1 rows (about 10 s): one stream, then :data:`L1_STREAMS` streams of a run."""
    from audit import open_store
    from audit.people import add_token

    db = str(Path(suite.workdir) / "l1.db")
    store = open_store(db)
    token = add_token(store, "bench")
    store.close()
    proc, base = _serve(db)
    try:
        for streams in (1, L1_STREAMS):
            log(f"  L1: {streams} stream(s) of a {L1_CYCLES}-cycle run")
            lags = _one(base, token, db, streams, f"l1-{streams}")
            ms = sorted(lag * 1000 for lag in lags)
            p50 = statistics.median(ms)
            p95 = statistics.quantiles(ms, n=20, method="inclusive")[18]
            verdict = "met" if p95 <= L1_TARGET_MS else "NOT met"
            suite.add(
                Row(
                    "L1 event commit → SSE client",
                    f"{streams} stream{'s' if streams > 1 else ''}",
                    "ms",
                    False,
                    Stat(p95, ms[0], ms[-1]),
                    target=("<=", L1_TARGET_MS),
                    note=f"p95 {p95:.1f} ms, p50 {p50:.1f} ms over {len(ms)} arrivals "
                    f"(p95 target <= {L1_TARGET_MS:.0f} ms: {verdict})",
                ),
                None,
            )
    finally:
        proc.terminate()
        proc.wait(30)
