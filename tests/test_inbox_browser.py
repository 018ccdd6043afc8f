"""The approval inbox in a real browser: Debian's chromium driven by Playwright.

A person signs in with an API token, opens the inbox, opens the gate of the
vendored-component dependency audit, reads the proposal and its lineage, and
approves (or rejects) it; the run resumes and the page shows its new state.
Screenshots go to ``tmp_path``, or to ``$CONVERGE_SCREENSHOTS`` (the docs' images
are made with ``CONVERGE_SCREENSHOTS=docs/images``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from audit.people import add_token
from audit.store import SqlRunStore
from tests.faultfixtures import opened
from tests.webfixtures import served, vendored_run

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _chromium() -> str:
    path = CHROMIUM if os.path.exists(CHROMIUM) else shutil.which("chromium")
    if path is None:
        message = "Debian's chromium is missing: run `make browser` (apt-get install chromium)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlRunStore]:
    with opened(str(tmp_path / "inbox.db")) as s:
        yield s


EXPECT_TIMEOUT_MS = 30_000
"""How long an ``expect()`` without a timeout of its own waits for its condition
(playwright's default, 5 s, is short for a page redrawn by a run that resumes in a
loaded process; a claim of time says its timeout itself)."""


@pytest.fixture
def browser_page(tmp_path: Path) -> Iterator[object]:
    from playwright.sync_api import expect, sync_playwright

    executable = _chromium()
    expect.set_options(timeout=EXPECT_TIMEOUT_MS)
    with sync_playwright() as pw:
        browser = pw.chromium.launch_persistent_context(
            str(tmp_path / "profile"),
            executable_path=executable,
            args=ARGS,
            headless=True,
            viewport={"width": 1280, "height": 900},
        )
        try:
            yield browser.new_page()
        finally:
            browser.close()


def _shots(tmp_path: Path) -> Path:
    target = Path(os.environ.get("CONVERGE_SCREENSHOTS") or tmp_path / "shots")
    target.mkdir(parents=True, exist_ok=True)
    return target


def _sign_in(page: object, base: str, token: str) -> None:
    from playwright.sync_api import Page, expect

    assert isinstance(page, Page)
    page.goto(base + "/")
    expect(page).to_have_url(f"{base}/login?next=/")
    page.fill("#token", token)
    page.click("#sign-in")
    expect(page.locator("#who")).to_have_text("alice")


@contextmanager
def at_the_pending_gate(page: object, store: SqlRunStore) -> Iterator[str]:
    """The vendored audit run into ``store`` (paused at its gate) and served; alice
    signed in on ``page``, which shows the pending gate: yields the server's base URL."""
    from playwright.sync_api import Page

    assert isinstance(page, Page)
    vendored_run(store)
    token = add_token(store, "alice")
    with served(store) as base:
        _sign_in(page, base, token)
        page.locator("#pending a").first.click()
        yield base


def test_an_approver_signs_in_reads_the_gate_approves_it_and_sees_the_run_meet_its_criteria(
    store: SqlRunStore, browser_page: object, tmp_path: Path
) -> None:
    from playwright.sync_api import Page, expect

    page = browser_page
    assert isinstance(page, Page)
    paused = vendored_run(store)
    assert paused.stop_reason.kind_code() == "hitl_gate_pending"
    token = add_token(store, "alice")
    shots = _shots(tmp_path)
    with served(store) as base:
        _sign_in(page, base, token)
        row = page.locator("#pending tr", has_text="legacy-left-pad")
        expect(row).to_have_count(1)
        expect(row).to_contain_text("dependency-audit-vendored")
        page.screenshot(path=str(shots / "inbox.png"), full_page=True)

        row.locator("a").first.click()
        expect(page.locator("#proposal-key")).to_have_text("license.unknown")
        expect(page.locator("#proposal")).to_contain_text("legacy-left-pad")
        # the lineage is drawn: the waiting proposal and the package fact it derives from
        expect(page.locator("#lineage svg g.node.highlight")).to_have_count(1)
        expect(page.locator("#lineage svg g.node.highlight")).to_contain_text("license.unknown")
        expect(page.locator("#lineage svg g.node")).to_have_count(2)
        expect(page.locator("#lineage svg")).to_contain_text("name=legacy-left-pad")
        expect(page.locator("#parents")).to_contain_text("package")
        expect(page.locator("#lineage svg path.edge")).to_have_count(1)
        page.screenshot(path=str(shots / "gate.png"), full_page=True)

        page.fill("#reason", "vendored from our own repository; MIT in its header")
        page.click("#approve")
        expect(page.locator("#stop-kind")).to_have_text("criteria_met")
        expect(page.locator("#run-status")).to_have_text("stopped")
        expect(page.locator("#run-gates")).to_contain_text("alice")
        expect(page.locator("#budget svg g.bar")).not_to_have_count(0)
        page.screenshot(path=str(shots / "run.png"), full_page=True)

    for name in ("inbox.png", "gate.png", "run.png"):
        assert (shots / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    gate = store.gates()[0]
    assert (gate.status, gate.decided_by) == ("approved", "alice")
    [decided] = store.events(gate.run_id, kinds=["gate_decided"])
    assert decided.payload["by"] == "alice"
    assert "MIT in its header" in decided.payload["reason"]
    assert store.verify(gate.run_id).ok


def test_an_approver_rejects_the_gate_with_a_reason_and_the_run_records_it(
    store: SqlRunStore, browser_page: object
) -> None:
    from playwright.sync_api import Page, expect

    page = browser_page
    assert isinstance(page, Page)
    with at_the_pending_gate(page, store) as base:
        page.fill("#reason", "not ours to ship")
        page.click("#reject")
        expect(page.locator("#run-gates")).to_contain_text("rejected")
        expect(page.locator("#run-gates")).to_contain_text("not ours to ship")
        # a rejected license stays unclassified: the run ends without meeting its criteria
        expect(page.locator("#stop-kind")).not_to_have_text("criteria_met")
        page.goto(base + "/")
        expect(page.locator("#empty")).to_be_visible()
    gate = store.gates()[0]
    assert (gate.status, gate.decided_by, gate.reason) == ("rejected", "alice", "not ours to ship")
    [decided] = store.events(gate.run_id, kinds=["gate_decided"])
    assert decided.payload == {
        "gate_id": gate.gate_id,
        "approved": False,
        "status": "rejected",
        "by": "alice",
        "reason": "not ours to ship",
        "decided_at": gate.decided_at,
    }
