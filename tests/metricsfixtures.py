"""Helpers of the operations tests (issue 57 part A): runs queued for a server's pool,
the metrics text parsed, promtool, and the helper processes (a worker, Prometheus)
yielded once they answer."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import func, select

from audit import open_store
from audit.run_queue import queue_run
from audit.tables import audit_events
from converge.jobs import load_job
from engine import RunHeader, new_run_id
from tests.realserve import terminate
from tests.servicefixtures import until

PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
ALLOWED_LABELS = {"kind", "category", "suggestor", "model", "direction", "le"}
"""The only labels converge's families carry (never a run id, a gate id or a person)."""


def answers_200(proc: subprocess.Popen[bytes], log: Path, url: str, what: str) -> bool:
    """For :func:`tests.servicefixtures.until`: whether ``url`` answers 200 now (False on
    no answer); AssertionError with ``log``'s tail once ``proc`` (``what``) has exited."""
    if proc.poll() is not None:
        raise AssertionError(f"{what} exited:\n{log.read_text()[-3000:]}")
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def queue_jobs(url: str, job: Path, n: int) -> list[str]:
    """``n`` runs of ``job`` recorded ``queued`` in the store at ``url`` (a server's pool
    or a worker takes them up); their ids."""
    loaded = load_job(job)
    store = open_store(url)
    try:
        ids = []
        for _ in range(n):
            run_id = new_run_id()
            queue_run(store, RunHeader(run_id, loaded.name, loaded.record(), (), time.time()))
            ids.append(run_id)
        return ids
    finally:
        store.close()


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a metrics text: (name, sorted labels) → value."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(text: str, name: str, **labels: str) -> float:
    """The sample ``name{labels}`` of a metrics text (0 when absent)."""
    return samples(text).get((name, tuple(sorted(labels.items()))), 0.0)


def total(text: str, name: str) -> float:
    """The sum of every sample named ``name`` (all label values)."""
    return sum(v for (n, _), v in samples(text).items() if n == name)


def label_names(text: str) -> set[str]:
    """Every label name of the ``converge_*`` samples of a metrics text."""
    return {
        k
        for (name, labels), _ in samples(text).items()
        if name.startswith("converge_")
        for k, _ in labels
    }


def scrape(base: str, token: str | None = None, path: str = "/metrics") -> str:
    """``GET base/metrics`` (with a bearer token when given): its text (asserts 200)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    answer = httpx.get(f"{base}{path}", headers=headers, timeout=10)
    assert answer.status_code == 200, answer.text[:500]
    return answer.text


def promtool(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``promtool ARGS`` (its output captured)."""
    return subprocess.run(
        [PROMTOOL, *args], input=stdin, capture_output=True, text=True, timeout=60, check=False
    )


def events_of_kind(url: str, kind: str) -> int:
    """How many audit events of ``kind`` the store at ``url`` holds."""
    store = open_store(url)
    try:
        with store.transaction(write=False) as conn:
            counted = select(func.count()).select_from(audit_events)
            return int(conn.execute(counted.where(audit_events.c.kind == kind)).scalar_one())
    finally:
        store.close()


@contextmanager
def health_worker(
    db: str, queue: str, log: Path, port: int, *, concurrency: int = 2
) -> Iterator[subprocess.Popen[bytes]]:
    """``converge worker --broker $CONVERGE_TEST_BROKER --queue QUEUE --db DB
    --health-port PORT`` as its own process, yielded once its ``/readyz`` answers
    200; afterwards SIGTERM (it must exit within 10 s) and its queue deleted."""
    from kombu import Connection

    from tests.realserve import converge_process, stop_within
    from tests.workerfixtures import BROKER

    args = ["worker", "--broker", BROKER, "--queue", queue, "--db", db]
    args += ["--concurrency", str(concurrency), "--health-port", str(port)]
    proc = converge_process(*args, log=log)
    ready = f"http://127.0.0.1:{port}/readyz"
    try:
        until(lambda: answers_200(proc, log, ready, "the worker"), timeout=60, what=ready)
        yield proc
    finally:
        if proc.poll() is None:
            with suppress(AssertionError):
                stop_within(proc, signal.SIGTERM, log)
        with Connection(BROKER, connect_timeout=3) as conn:
            channel = conn.default_channel
            channel.queue_delete(queue)
            channel.exchange_delete(queue)


RULES = Path(__file__).resolve().parent.parent / "docs" / "operations" / "converge-rules.yml"
"""The alerting and recording rules docs/operations.md ships."""


@dataclass(frozen=True)
class Target:
    """One scrape job of the test's Prometheus: its name, ``host:port`` and, when its
    ``/metrics`` needs one, a file holding a bearer token."""

    job: str
    address: str
    token_file: Path | None = None


def prometheus_config(targets: list[Target], rules: Path = RULES) -> dict[str, Any]:
    """A Prometheus configuration scraping ``targets`` every second, loading ``rules``."""
    jobs = []
    for t in targets:
        job: dict[str, Any] = {"job_name": t.job, "static_configs": [{"targets": [t.address]}]}
        if t.token_file is not None:
            job["authorization"] = {"type": "Bearer", "credentials_file": str(t.token_file)}
        jobs.append(job)
    return {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(rules)],
        "scrape_configs": jobs,
    }


@contextmanager
def prometheus_server(workdir: Path, targets: list[Target]) -> Iterator[str]:
    """The real Prometheus (``/usr/bin/prometheus``) on a free port of 127.0.0.1 with a
    configuration this writes and its own storage in ``workdir``; yields its base URL
    once ``/-/ready`` answers 200, stopped afterwards."""
    import yaml

    from tests.realserve import free_port

    config = workdir / "prometheus.yml"
    config.write_text(yaml.safe_dump(prometheus_config(targets)))
    port = free_port()
    log = workdir / "prometheus.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={config}",
                f"--storage.tsdb.path={workdir / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        ready = f"{base}/-/ready"
        until(lambda: answers_200(proc, log, ready, "prometheus"), timeout=60, what=ready)
        yield base
    finally:
        terminate(proc, 10)


def query(base: str, expr: str) -> list[dict[str, Any]]:
    """The result vector of the instant query ``expr`` on Prometheus' HTTP API."""
    answer = httpx.get(f"{base}/api/v1/query", params={"query": expr}, timeout=10)
    body = answer.json()
    assert answer.status_code == 200 and body["status"] == "success", body
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def by_label(result: list[dict[str, Any]], label: str) -> dict[str, float]:
    """A vector as ``{its label's value: the sample's value}``."""
    return {r["metric"].get(label, ""): float(r["value"][1]) for r in result}
