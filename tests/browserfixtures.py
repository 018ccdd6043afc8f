"""Helpers of the browser tests (the ``browser_page`` fixture, or its alias ``page``,
is in ``tests/conftest.py``): screenshots' directory, signing in through the login
form, and a page at the vendored audit's pending gate.

Playwright is imported inside the helpers, so that collecting the tests needs no
playwright.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from audit.people import add_token
from tests.webfixtures import served, vendored_run

if TYPE_CHECKING:
    from playwright.sync_api import Page

    from audit.store import SqlRunStore

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
"""The first 8 bytes of every PNG file (a screenshot that was written)."""


def screenshots_dir(tmp_path: Path) -> Path:
    """Where a test writes its screenshots, created: ``$CONVERGE_SCREENSHOTS`` if set
    (the docs' images are made with ``CONVERGE_SCREENSHOTS=docs/images``), else
    ``tmp_path / "shots"``."""
    target = Path(os.environ.get("CONVERGE_SCREENSHOTS") or tmp_path / "shots")
    target.mkdir(parents=True, exist_ok=True)
    return target


def sign_in(page: Page, base: str, token: str) -> None:
    """Sign alice in on ``page`` through the login form of the server at ``base``
    (``http://host:port``, no trailing slash) with her API ``token``; ends on the
    inbox. Raises playwright's ``AssertionError`` if a step's page does not come."""
    from playwright.sync_api import expect

    page.goto(base + "/")
    expect(page).to_have_url(f"{base}/login?next=/")
    page.fill("#token", token)
    page.click("#sign-in")
    expect(page.locator("#who")).to_have_text("alice")


@contextmanager
def at_the_pending_gate(page: Page, store: SqlRunStore) -> Iterator[str]:
    """The vendored audit run into ``store`` (paused at its gate) and served; alice
    signed in on ``page``, which shows the pending gate: yields the server's base URL
    (the server stops on exit)."""
    vendored_run(store)
    token = add_token(store, "alice")
    with served(store) as base:
        sign_in(page, base, token)
        page.locator("#pending a").first.click()
        yield base
