"""Shared pieces of the inbox tests: a served app on a free port, jobs, tokens.

``served(store)`` runs ``converge.web.create_app(store)`` under uvicorn in a
thread on a free 127.0.0.1 port (bound by the test) and yields its base URL; it stops the server
afterwards. ``vendored_run(store)`` runs the dependency audit with one vendored
component (examples/dependency_audit/vendored.yaml) until its HITL gate.
"""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI
from fastapi.testclient import TestClient

from audit.store import SqlRunStore
from converge.jobs import Job, load_job, parse_job
from converge.web import create_app
from converge.web.serving import server_config
from engine import RunResult

ROOT = Path(__file__).resolve().parent.parent
VENDORED = ROOT / "examples" / "dependency_audit" / "vendored.yaml"

QUORUM_JOB = """\
name: quorum
suggestors: [tests.hitlfixtures:scan, tests.hitlfixtures:count, tests.hitlfixtures:finish]
budget: {max_cycles: 10}
gates: [{hitl: {keys: [license.unknown], summary: "Classify {content[name]}",
                approvals_required: %d%s}}]
initial: {seed: [1]}
"""


@contextmanager
def served(
    store: SqlRunStore, app: FastAPI | None = None, *, forwarded_allow_ips: str | None = None
) -> Iterator[str]:
    """Serve the inbox over ``store`` (or ``app``, made by ``create_app``) with the
    settings of ``converge serve`` (``forwarded_allow_ips`` as its option); yield
    ``http://127.0.0.1:PORT``. On the way out, the runs its decisions resumed in its
    pool (``app.state.run_queue``) are waited for: after the block they have stopped."""
    app = app or create_app(store)
    # the socket listens before the server thread starts: clients queue in its
    # backlog until uvicorn accepts, so there is nothing to wait for
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    config = server_config(
        app, log_level="warning", lifespan="off", forwarded_allow_ips=forwarded_allow_ips
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
        settle(app)


def settle(app: FastAPI) -> None:
    """Wait for the runs ``app``'s decisions sent to its own pool (120 s at most)."""
    wait = getattr(app.state.run_queue, "wait", None)
    if wait is not None:
        wait(timeout=120)


def run_job(job: Job, store: SqlRunStore) -> RunResult:
    """Run ``job`` on ``store`` with its initial facts."""
    return job.build_engine(store).run(job.spec.initial or None)


def vendored_run(store: SqlRunStore) -> RunResult:
    """The vendored-component dependency audit, paused at its license gate."""
    return run_job(load_job(VENDORED), store)


def quorum_job(required: int, timeout_s: float | None = None) -> Job:
    """The small gated job of tests.hitlfixtures with a quorum (and a deadline)."""
    extra = "" if timeout_s is None else f", timeout_s: {timeout_s}, on_timeout: approve"
    return parse_job(QUORUM_JOB % (required, extra), "quorum.yaml")


def csrf_of(page: str) -> str:
    """The CSRF token of the first form of the HTML ``page`` (AssertionError: none)."""
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found is not None, page[:500]
    return found.group(1)


def logged_in(client: TestClient, token: str, next_: str, form: str = "/login") -> Any:
    """The login form at ``form`` read by ``client``, then sent with ``token`` and
    ``next_``: the answer (the test client's response; its redirect not followed)."""
    csrf = csrf_of(client.get(form).text)
    data = {"csrf": csrf, "token": token, "next": next_}
    return client.post("/login", data=data, follow_redirects=False)
