"""The approval inbox in a real browser: Debian's chromium driven by Playwright.

A person signs in with an API token, opens the inbox, opens the gate of the
vendored-component dependency audit, reads the proposal and its lineage, and
approves (or rejects) it; the run resumes and the page shows its new state.
Screenshots go to ``tmp_path``, or to ``$CONVERGE_SCREENSHOTS`` (the docs' images
are made with ``CONVERGE_SCREENSHOTS=docs/images``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from audit.people import add_token
from audit.store import SqlRunStore
from tests.browserfixtures import PNG_MAGIC, at_the_pending_gate, screenshots_dir, sign_in
from tests.faultfixtures import opened
from tests.webfixtures import served, vendored_run

if TYPE_CHECKING:
    from playwright.sync_api import Page


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlRunStore]:
    """A SQLite store in ``tmp_path`` (this module's, not conftest's two kinds)."""
    with opened(str(tmp_path / "inbox.db")) as s:
        yield s


def test_an_approver_signs_in_reads_the_gate_approves_it_and_sees_the_run_meet_its_criteria(
    store: SqlRunStore, page: Page, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    paused = vendored_run(store)
    assert paused.stop_reason.kind_code() == "hitl_gate_pending"
    token = add_token(store, "alice")
    shots = screenshots_dir(tmp_path)
    with served(store) as base:
        sign_in(page, base, token)
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
        assert (shots / name).read_bytes()[:8] == PNG_MAGIC
    gate = store.gates()[0]
    assert (gate.status, gate.decided_by) == ("approved", "alice")
    [decided] = store.events(gate.run_id, kinds=["gate_decided"])
    assert decided.payload["by"] == "alice"
    assert "MIT in its header" in decided.payload["reason"]
    assert store.verify(gate.run_id).ok


def test_an_approver_rejects_the_gate_with_a_reason_and_the_run_records_it(
    store: SqlRunStore, page: Page
) -> None:
    from playwright.sync_api import expect

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
