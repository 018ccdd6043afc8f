"""Words of the messages the engine and its users print: ``counted``."""

from __future__ import annotations

__all__ = ["counted"]


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1: ``1 cycle``, ``55 cycles``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
