"""Prometheus metrics of converge (extras ``web`` and ``workers``; docs/operations.md).

The face of three private modules:

- :mod:`converge.metrics._families`: the families (``converge_runs_started_total``,
  ``converge_runs_stopped_total{kind, category}``, ``converge_gate_wait_seconds``...),
  never labelled by a run id or a person;
- :mod:`converge.metrics._recording`: fed by what the engine already hands out
  (the events it writes to its store, its suggestors' executions):
  :func:`instrument`, :func:`meter_store`, :func:`gate_decided`, :func:`takeover`;
- :mod:`converge.metrics._exposition`: the ``/metrics`` text over every process of a
  pool (:func:`exposition`, :class:`QueueDepth`; the pool's directory is
  :func:`converge.service.metering.shared_directory`'s).

The engine imports none of this. Importing it needs ``prometheus-client``: without
it, a :class:`~engine.ConfigurationError` names the extra to install.
"""

from __future__ import annotations

from engine import ConfigurationError

try:
    import prometheus_client  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ConfigurationError(
        "metrics need prometheus-client: pip install 'converge-engine[web]' "
        f"(or [workers]; {exc.name} is missing)"
    ) from exc

from converge.metrics._exposition import (
    CONTENT_TYPE,
    QueueDepth,
    exposition,
)
from converge.metrics._families import (
    CYCLES,
    DECISION_SECONDS,
    FACTS_PROMOTED,
    FAMILIES,
    GATE_WAIT_SECONDS,
    GATES_OPENED,
    LEASE_TAKEOVERS,
    MODEL_TOKENS,
    RUNS_STARTED,
    RUNS_STOPPED,
    STORE_COMMIT_SECONDS,
    SUGGESTOR_SECONDS,
)
from converge.metrics._recording import (
    TimedSuggestor,
    count_events,
    gate_decided,
    instrument,
    meter_store,
    takeover,
)

__all__ = [
    "CONTENT_TYPE",
    "CYCLES",
    "DECISION_SECONDS",
    "FACTS_PROMOTED",
    "FAMILIES",
    "GATES_OPENED",
    "GATE_WAIT_SECONDS",
    "LEASE_TAKEOVERS",
    "MODEL_TOKENS",
    "RUNS_STARTED",
    "RUNS_STOPPED",
    "STORE_COMMIT_SECONDS",
    "SUGGESTOR_SECONDS",
    "QueueDepth",
    "TimedSuggestor",
    "count_events",
    "exposition",
    "gate_decided",
    "instrument",
    "meter_store",
    "takeover",
]
