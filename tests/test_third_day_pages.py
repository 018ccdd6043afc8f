"""What a user still trips on after a week in the inbox (issue 59), through the real
``converge serve``: the decision's answer says the run is queued and where to follow
it; the run page's budget bars while it runs; the lineage of a run whose keys derive
from each other in a cycle."""

from __future__ import annotations

import html
import json
import os
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.accessfixtures import PageClient
from tests.faultfixtures import run_cli
from tests.hitlfixtures import STORES, store_url_for
from tests.realserve import converge_process, served_cli
from tests.servicefixtures import write_job
from tests.test_third_day_cli import DONE_JOB, OSCILLATOR
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


# -- 12. the run page: budget bars while it runs; a lineage with a cycle ----------------


def test_the_run_page_shows_the_budget_of_a_running_run_and_draws_a_cyclic_lineage(
    store_url: str, tmp_path: Path
) -> None:
    hold = {"until": str(tmp_path / "release"), "started": str(tmp_path / "started")}
    held = write_job(
        tmp_path / "held.yaml",
        {
            "name": "held",
            "suggestors": ["tests.accessfixtures:blocked"],
            "budget": {"max_cycles": 8, "max_seconds": 600},
            "initial": {"hold": [hold]},
        },
    )
    oscillator = run_cli(["run", OSCILLATOR, "--db", store_url, "--json"])
    assert oscillator.returncode == 3
    oscillator_id = json.loads(oscillator.stdout)["run_id"]
    token = token_for(store_url, "ada")
    running = converge_process("run", str(held), "--db", store_url, log=tmp_path / "run.log")
    try:
        while not (tmp_path / "started").exists():  # its first cycle is under way
            assert running.poll() is None, (tmp_path / "run.log").read_text()
            time.sleep(0.05)
        [row] = [r for r in runs_of(store_url) if r["job"] == "held"]
        with served_cli(store_url, tmp_path / "serve.log") as served:
            pages = PageClient(served.base, token)
            try:
                live = pages.get(f"/runs/{row['run_id']}").text
                cyclic = pages.get(f"/runs/{oscillator_id}").text
            finally:
                pages.close()
    finally:
        (tmp_path / "release").touch()
        assert running.wait(timeout=120) == 0, (tmp_path / "run.log").read_text()

    assert row["status"] == "running"
    budget = section(live, "run-budget")
    assert "No budget recorded yet" not in budget, budget
    # its limits, and what it used as committed so far (its first cycle is not yet)
    assert 'data-dimension="cycles"' in budget and "0 / 8 (0.0%)" in budget, budget
    assert re.search(r"facts</text>.*?>1 / 10000 ", budget)
    assert re.search(r"seconds</text>.*?>[0-9.]+ / 600 \(", budget)
    lineage = section(cyclic, "lineage")
    assert 'data-id="ping"' in lineage and 'data-id="pong"' in lineage, lineage
    assert 'class="edge back"' in lineage and 'class="edge"' in lineage
    note = re.search(r'<p class="muted" id="lineage-note">([^<]*)</p>', lineage)
    assert note is not None and "cycle (ping → pong → ping)" in html.unescape(note.group(1))


def runs_of(url: str) -> list[dict[str, Any]]:
    """``converge runs --json``."""
    listed: list[dict[str, Any]] = json.loads(run_cli(["runs", "--json", "--db", url]).stdout)
    return listed


def section(page: str, part: str) -> str:
    """The ``<div id=PART>`` of a page, up to the next ``<h2>``."""
    start = page.index(f'id="{part}"')
    end = page.find("<h2>", start)
    return page[start : end if end > 0 else len(page)]
