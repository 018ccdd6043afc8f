"""What a user still trips on after a week in the inbox (issue 59), through the real
``converge serve``: the decision's answer says the run is queued and where to follow
it; the run page's budget bars while it runs; the lineage of a run whose keys derive
from each other in a cycle."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.faultfixtures import run_cli
from tests.hitlfixtures import STORES, store_url_for
from tests.realserve import served_cli
from tests.servicefixtures import write_job
from tests.test_third_day_cli import DONE_JOB
from tests.workerfixtures import BROKER, services_unreachable

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(params=STORES)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh store of each kind."""
    with store_url_for(request.param, tmp_path) as url:
        yield str(url)


@pytest.fixture
def idle_queue() -> Iterator[str]:
    """A broker queue of its own that no worker consumes (deleted afterwards): a resume
    sent there waits, as one does until a worker is free."""
    reason = services_unreachable()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    name = f"converge-third-day-{uuid.uuid4().hex[:8]}"
    yield name
    from kombu import Connection

    with Connection(BROKER, connect_timeout=3) as conn:
        conn.default_channel.queue_delete(name)
        conn.default_channel.exchange_delete(name)


def token_for(url: str, name: str) -> str:
    """``converge token add NAME``: the token printed."""
    made = run_cli(["token", "add", name, "--db", url])
    assert made.returncode == 0, made.stderr
    return made.stdout.split()[-1]  # the token is the last word


# -- 2. the decision's answer: queued, and where to follow it ----------------------------


def test_a_decision_answers_the_run_queued_with_where_to_follow_it(
    store_url: str, idle_queue: str, tmp_path: Path
) -> None:
    gated = {**DONE_JOB, "gates": [{"hitl": {"keys": ["license.unknown"]}}]}
    job = write_job(tmp_path / "job.yaml", gated)
    paused = run_cli(["run", str(job), "--db", store_url, "--json"])
    assert paused.returncode == 10, paused.stderr
    run_id = json.loads(paused.stdout)["run_id"]
    gate = json.loads(paused.stdout)["stop_reason"]["gate_id"]
    token = token_for(store_url, "alice")
    auth = {"Authorization": f"Bearer {token}"}

    with served_cli(
        store_url, tmp_path / "serve.log", "--broker", BROKER, "--queue", idle_queue
    ) as served:
        answer = httpx.post(
            f"{served.base}/api/gates/{gate}/decision",
            json={"approved": True, "reason": "fine"},
            headers=auth,
            timeout=30,
        )
        later = httpx.get(f"{served.base}/api/runs/{run_id}", headers=auth, timeout=30)

    assert answer.status_code == 202, answer.text
    run = answer.json()["run"]
    # what is true: nothing ran yet, its resume waits for a worker
    assert (run["status"], run["kind"]) == ("queued", None), run
    assert run["events_url"] == f"/api/runs/{run_id}/events"
    assert run["api_url"] == f"/api/runs/{run_id}"
    assert later.json()["run"]["status"] == "paused"  # the store: not taken by a worker yet
    row = next(
        line
        for line in (ROOT / "docs" / "inbox.md").read_text().splitlines()
        if line.startswith("| `POST /api/gates/{id}/decision`")
    )
    assert (
        "`queued`" in row and "`events_url`" in row and "where the resumed run stopped" not in row
    )
