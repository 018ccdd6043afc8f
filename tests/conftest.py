"""Fixtures shared by several test modules (use them by name), and what makes the
tests independent of the process that runs them (one pytest or ``pytest -n N``)."""

from __future__ import annotations

import os
import shutil
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from sqlalchemy import Connection, Engine, event
from sqlalchemy.pool import QueuePool

if TYPE_CHECKING:
    from playwright.sync_api import Page

    from audit import SqlRunStore

# ``import readline`` (pytest imports it) sets COLUMNS=80 and LINES=24 in the C
# environment of the process: the processes it starts (pytest-xdist's workers, the
# ``converge`` commands the tests run) would then see a terminal 80 columns wide,
# while the tests' own ``os.environ``, read at start-up, has no COLUMNS. The tables
# ``converge`` prints fit ``$COLUMNS`` when it is set: a test that wants a width says
# so (``env={"COLUMNS": ...}`` or ``terminal_width=``); otherwise there is none,
# whichever process runs the test.
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)
    os.unsetenv(_name)


@pytest.fixture
def no_model_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    """No pydantic-ai model may reach a network, and no ``$CONVERGE_MODEL`` of the
    machine picks one (the agent tests use TestModel and FunctionModel only)."""
    from pydantic_ai import models

    monkeypatch.setattr(models, "ALLOW_MODEL_REQUESTS", False)
    monkeypatch.delenv("CONVERGE_MODEL", raising=False)


@pytest.fixture(params=("sqlite", "postgresql"))
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh store URL of each kind (tests.hitlfixtures.STORES): a SQLite file in
    ``tmp_path``, a throwaway PostgreSQL schema; a module may define its own."""
    from tests.hitlfixtures import store_url_for

    with store_url_for(request.param, tmp_path) as url:
        yield url


@pytest.fixture
def store(store_url: str) -> Iterator[SqlRunStore]:
    """The store at ``store_url``, closed after the test; a module may define its own."""
    from audit import open_store

    s = open_store(store_url)
    yield s
    s.close()


CHROMIUM = "/usr/bin/chromium"
"""Debian's chromium (``make browser``); else the first ``chromium`` on ``$PATH``."""

CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)

EXPECT_TIMEOUT_MS = 30_000
"""How long an ``expect()`` without a timeout of its own waits for its condition
(playwright's default, 5 s, is short for a page redrawn by a run that resumes in a
loaded process; a claim of time says its timeout itself)."""


def _chromium() -> str:
    """The path of chromium's executable; the test is skipped without one (failed
    under ``$CI``, where ``make browser`` should have installed it)."""
    path = CHROMIUM if os.path.exists(CHROMIUM) else shutil.which("chromium")
    if path is None:
        message = "Debian's chromium is missing: run `make browser` (apt-get install chromium)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture
def browser_page(tmp_path: Path) -> Iterator[Page]:
    """A page of headless chromium, 1280x900, its profile in ``tmp_path / "profile"``;
    closed after the test. Playwright is imported here, so that collecting the tests
    needs no playwright."""
    from playwright.sync_api import expect, sync_playwright

    executable = _chromium()
    expect.set_options(timeout=EXPECT_TIMEOUT_MS)
    with sync_playwright() as pw:
        browser = pw.chromium.launch_persistent_context(
            str(tmp_path / "profile"),
            executable_path=executable,
            args=list(CHROMIUM_ARGS),
            headless=True,
            viewport={"width": 1280, "height": 900},
        )
        try:
            yield browser.new_page()
        finally:
            browser.close()


@pytest.fixture
def page(browser_page: Page) -> Page:
    """:func:`browser_page` under the name the browser tests read it by."""
    return browser_page


# Test files whose tests share a fixture built once per module (a docs site, Celery
# workers, a template store): each is sent whole to one test process, the largest
# first, so that no other process builds the fixture again. pytest-xdist's own
# ``--dist loadgroup`` cannot do it under pytest 9 (it renames ``item._nodeid``, which
# pytest 9 no longer reads), so the scheduler is chosen here.
WHOLE_FILES = frozenset(
    {
        "tests/test_bundle_bad_files.py",
        "tests/test_docs_site.py",
        "tests/test_go_sumdb.py",
        "tests/test_hostile_cells.py",
        "tests/test_trust_fuzz.py",
        "tests/test_workers.py",
        "tests/test_workers_chaos.py",
    }
)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``-n N --dist loadgroup``: the files of :data:`WHOLE_FILES` each to one
    process (largest first), every other test to whichever process is free."""
    if config.getoption("dist", None) != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class WholeFiles(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return path if path in WHOLE_FILES else nodeid

    return WholeFiles(config, log)


SLOW_FIRST = (
    "tests/test_hosts_faults.py",
    "tests/test_exactly_once_races.py",
    "tests/test_service_workers.py",
    "tests/test_local_model.py",
    "tests/test_first_day_api.py::test_schemathesis",
    "tests/test_phoenix.py",
    "tests/test_getting_started.py",
    "tests/test_readme.py",
    "tests/test_exactly_once_sweep.py",
    "tests/test_cli_signals.py",
    "tests/test_hitl_race.py",
    "tests/test_second_day_pages.py",
    "tests/test_ledger_sequencer_kills.py",
    "tests/test_audit_chaos.py",
)
"""Tests of a minute or more on two cores (fault trials, real models, whole guides):
collected first, so that the test processes start them first and none is left
running one alone at the end."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests of :data:`SLOW_FIRST` first, each group in its own order."""
    items.sort(key=lambda item: not item.nodeid.startswith(SLOW_FIRST))


# PostgreSQL engines that connected during the tests: after each test their idle
# pooled connections are closed, so that a test that leaves a store open does not
# keep its connections while the test processes run other tests (several processes
# ran the server, max_connections=100, out of connections once).
_PG_ENGINES: weakref.WeakSet[Engine] = weakref.WeakSet()


@event.listens_for(Engine, "engine_connect")
def _note_pg_engine(conn: Connection) -> None:
    if conn.engine.dialect.name == "postgresql":
        _PG_ENGINES.add(conn.engine)


@pytest.fixture(autouse=True)
def _idle_pg_connections_closed() -> Iterator[None]:
    yield
    for engine in list(_PG_ENGINES):
        pool = engine.pool
        # an engine with a connection out may hold a lock on it: left alone
        if isinstance(pool, QueuePool) and pool.checkedout() == 0:
            pool.dispose()
