"""What a person who sees a run, but may not read one of its gates, sees of that gate:
that it exists and its status, never its content. One rule for every surface (the
run's page and JSON, its event stream, ``converge show``, ``events``, ``facts``):

- the gate itself is :func:`gate_stub`: ``gate_id``, ``run_id``, ``status``,
  ``cycle``, ``opened_at``, ``expires_at``, ``decided_at`` and ``restricted: true``;
- anything else that names it (a ``gate_opened``, ``gate_vote``, ``gate_comment``,
  ``gate_escalated`` or ``gate_decided`` event, the stop reason of a run paused at
  it, the ``hitl.rejected`` fact of its rejection) keeps, of each mapping that
  names the gate, only :data:`KEPT` and says ``restricted: true``
  (:func:`redacted`); a redacted event has no ``hash`` (a hash of a short
  proposal would let it be guessed).

Pure functions over plain JSON values.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Final

__all__ = ["KEPT", "RESTRICTED", "STUB_FIELDS", "event_as_seen", "gate_stub", "redacted"]

RESTRICTED: Final = "restricted"
"""The key (``true``) that marks what was taken out."""
STUB_FIELDS: Final = (
    "gate_id",
    "run_id",
    "status",
    "cycle",
    "opened_at",
    "expires_at",
    "decided_at",
)
"""What anyone who sees a run sees of each of its gates."""
KEPT: Final = frozenset(
    {
        "gate_id",
        "run_id",
        "kind",
        "status",
        "cycle",
        "approved",
        "opened_at",
        "expires_at",
        "decided_at",
    }
)
"""The keys a mapping naming a restricted gate keeps (its existence and status)."""


def gate_stub(gate: dict[str, Any]) -> dict[str, Any]:
    """A gate as a person who may not read it sees it (see the module)."""
    stub: dict[str, Any] = {k: gate[k] for k in STUB_FIELDS if k in gate}
    stub[RESTRICTED] = True
    return stub


def redacted(value: Any, gates: Collection[str]) -> Any:
    """``value`` (JSON) with every mapping that names one of ``gates`` (its
    ``gate_id``) cut to :data:`KEPT` plus ``restricted: true``, at any depth;
    ``value`` itself when nothing names them (no copy)."""
    if not gates:
        return value
    if isinstance(value, dict):
        if value.get("gate_id") in gates:
            cut = {k: v for k, v in value.items() if k in KEPT}
            cut[RESTRICTED] = True
            return cut
        out = {k: redacted(v, gates) for k, v in value.items()}
        return value if all(out[k] is value[k] for k in value) else out
    if isinstance(value, list):
        items = [redacted(v, gates) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    return value


def event_as_seen(event: dict[str, Any], gates: Collection[str]) -> dict[str, Any]:
    """An event (``StoredEvent.to_dict()``'s shape) as seen by a person who may not
    read ``gates``: its payload :func:`redacted`, and no ``hash`` when anything was
    taken out."""
    payload = event.get("payload")
    seen = redacted(payload, gates)
    if seen is payload:
        return event
    return {**event, "payload": seen, "hash": None, RESTRICTED: True}
