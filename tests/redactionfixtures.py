"""Fixtures and helpers shared by the redaction test modules (issue 56): a store URL
of chain format 2 on each backend, a store opened on it, and the redaction reason.

A test module takes the fixtures by binding them to their names (an import by name
would be shadowed, for ruff, by every test's parameter)::

    from tests import redactionfixtures

    url = redactionfixtures.url
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from audit import SqlRunStore, open_store
from audit.settings import CHAIN_FORMAT, set_setting
from tests.hitlfixtures import STORES, store_url_for

REASON = "GDPR art. 17 request #12"
"""The reason every redaction in these tests is given."""


@contextmanager
def opened(url: str, *, part_chars: int | None = None) -> Iterator[SqlRunStore]:
    """The store at ``url``, closed on exit; its checkpoints split into parts of at
    most ``part_chars`` characters when given (else the store's default)."""
    s = open_store(url)
    if part_chars is not None:
        s.part_chars = part_chars
    try:
        yield s
    finally:
        s.close()


@pytest.fixture(params=STORES)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh store's URL on each backend of ``STORES`` (sqlite, postgresql), its
    chain format set to 2 for the runs it will start."""
    with store_url_for(request.param, tmp_path) as u:
        with opened(u) as s:
            set_setting(s, CHAIN_FORMAT, "2")
        yield u


@pytest.fixture
def store(url: str) -> Iterator[SqlRunStore]:
    """The store at :func:`url`, open for the test and closed after it."""
    with opened(url) as s:
        yield s
