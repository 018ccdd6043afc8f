"""Fixtures shared by several test modules (use them by name), and what makes the
tests independent of the process that runs them (one pytest or ``pytest -n N``)."""

from __future__ import annotations

import os

import pytest

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
