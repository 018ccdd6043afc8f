"""PostgreSQL for the tests: required under CI, skipped (with the reason) elsewhere."""

from __future__ import annotations

import os

import pytest

from audit.testing import pg_unreachable_reason


def require_pg() -> None:
    """Fail when PostgreSQL is unreachable and ``CI`` is set; otherwise skip."""
    why = pg_unreachable_reason()
    if why is None:
        return
    if os.environ.get("CI"):
        pytest.fail(why)
    pytest.skip(why)
