"""A fork's first event encoded without encoding its facts again.

A fork's ``run_started`` carries every fact it took from its parent (50,000 at
cycle 50 of a 100k-fact run). Their canonical JSON is already
known: the parent's chained texts (``AuditEvent.fact_texts``), so the event's
canonical JSON is the rest of the payload encoded with a placeholder, and the
texts joined in its place: the same bytes as ``canonical_json(payload)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.facts import canonical_json

__all__ = ["started_json"]

_PLACEHOLDER = "\x00converge:initial_facts\x00"


def started_json(payload: dict[str, Any], texts: Sequence[str]) -> str:
    """``canonical_json(payload)`` of a ``run_started`` whose ``initial_facts``'
    canonical JSON are ``texts``, in order, spliced in rather than encoded again;
    encoded whole when the placeholder is not found exactly once. Raises
    ``TypeError``/``ValueError`` for a payload that is not JSON."""
    initial = payload.get("initial_facts")
    if not isinstance(initial, list) or len(initial) != len(texts):
        return canonical_json(payload)
    head = canonical_json({**payload, "initial_facts": _PLACEHOLDER})
    mark = canonical_json(_PLACEHOLDER)
    if head.count(mark) != 1:
        return canonical_json(payload)
    return head.replace(mark, "[" + ",".join(texts) + "]")
