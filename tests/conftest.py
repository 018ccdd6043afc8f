"""Fixtures shared by several test modules (use them by name)."""

from __future__ import annotations

import pytest


@pytest.fixture
def no_model_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    """No pydantic-ai model may reach a network, and no ``$CONVERGE_MODEL`` of the
    machine picks one (the agent tests use TestModel and FunctionModel only)."""
    from pydantic_ai import models

    monkeypatch.setattr(models, "ALLOW_MODEL_REQUESTS", False)
    monkeypatch.delenv("CONVERGE_MODEL", raising=False)
