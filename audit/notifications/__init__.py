"""Gate notifications, on the store's side: the outbox of their
deliveries (``_outbox``; docs/inbox.md).
"""

from __future__ import annotations

from audit.notifications._outbox import (
    CHAIN_SINK,
    DELIVERED,
    EVENTS,
    FAILED,
    LEASE_S,
    SENDING,
    Delivery,
    claim,
    deliveries,
    delivery,
    gates_to_notify,
    record_attempt,
    recorded,
)

__all__ = [
    "CHAIN_SINK",
    "DELIVERED",
    "EVENTS",
    "FAILED",
    "LEASE_S",
    "SENDING",
    "Delivery",
    "claim",
    "deliveries",
    "delivery",
    "gates_to_notify",
    "record_attempt",
    "recorded",
]
