"""The metric families of converge (Prometheus naming: ``converge_`` prefix, base
units, ``_total`` counters), never labelled by a run id or a person
(docs/operations.md has the table).

Created once per process on :data:`FAMILIES`. In a process whose environment
names ``PROMETHEUS_MULTIPROC_DIR`` when ``prometheus_client`` is first imported,
each value is written to a file of that directory, which the process serving
``/metrics`` reads for all the processes of its pool (:mod:`converge.metrics._exposition`).
"""

from __future__ import annotations

from typing import Final

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics

from engine.stop import ALL_VARIANTS

# no ``*_created`` series: when a series began is Prometheus' business
disable_created_metrics()  # type: ignore[no-untyped-call]
FAMILIES: Final = CollectorRegistry(auto_describe=True)
"""The registry of every family below (not prometheus_client's global one)."""

GATE_WAIT_BUCKETS: Final = (
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    300.0,
    900.0,
    3600.0,
    4 * 3600.0,
    86400.0,
    3 * 86400.0,
    7 * 86400.0,
)
"""Seconds: a gate is decided within seconds by a script, within days by a person."""
FAST_BUCKETS: Final = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
"""Seconds: a store commit, a decision request."""
SUGGESTOR_BUCKETS: Final = (0.001, 0.005, 0.025, 0.1, 0.5, 1, 2.5, 5, 15, 60, 300)
"""Seconds: a suggestor's execution, from a pure function to a model call."""

RUNS_STARTED: Final = Counter(
    "converge_runs_started", "Runs started (not resumed).", registry=FAMILIES
)
RUNS_STOPPED: Final = Counter(
    "converge_runs_stopped",
    "Runs stopped, by the kind and category of their stop reason.",
    ["kind", "category"],
    registry=FAMILIES,
)
for _variant in ALL_VARIANTS:  # every series at 0 from the start: a rate sees the first stop
    RUNS_STOPPED.labels(_variant.model_fields["kind"].default, _variant.category_.value)
GATES_OPENED: Final = Counter(
    "converge_gates_opened", "HITL gates opened (runs paused for a decision).", registry=FAMILIES
)
GATE_WAIT_SECONDS: Final = Histogram(
    "converge_gate_wait_seconds",
    "Seconds from a gate's opening to its decision (approved, rejected or expired).",
    buckets=GATE_WAIT_BUCKETS,
    registry=FAMILIES,
)
DECISION_SECONDS: Final = Histogram(
    "converge_decision_seconds",
    "Seconds a decision request of the inbox took, answer included.",
    buckets=FAST_BUCKETS,
    registry=FAMILIES,
)
CYCLES: Final = Counter("converge_cycles", "Cycles started by the runs.", registry=FAMILIES)
FACTS_PROMOTED: Final = Counter(
    "converge_facts_promoted", "Facts promoted into the runs' contexts.", registry=FAMILIES
)
SUGGESTOR_SECONDS: Final = Histogram(
    "converge_suggestor_seconds",
    "Seconds of each execution of a suggestor, by its name.",
    ["suggestor"],
    buckets=SUGGESTOR_BUCKETS,
    registry=FAMILIES,
)
MODEL_TOKENS: Final = Counter(
    "converge_model_tokens",
    "Model tokens spent by suggestors, by model and direction (input or output).",
    ["model", "direction"],
    registry=FAMILIES,
)
LEASE_TAKEOVERS: Final = Counter(
    "converge_lease_takeovers",
    "Runs sent again because their lease expired (their host died or hung).",
    registry=FAMILIES,
)
STORE_COMMIT_SECONDS: Final = Histogram(
    "converge_store_commit_seconds",
    "Seconds of each write of a run's events to the audit store.",
    buckets=FAST_BUCKETS,
    registry=FAMILIES,
)
