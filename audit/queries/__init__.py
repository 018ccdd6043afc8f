"""What the audit store answers: recorded runs and events as frozen values
(``_queries``), gates listed with the ones that cannot be read marked
(``_gate_rows``), a run's story per cycle (``_timeline``), a fact's lineage as a
networkx graph (``_lineage``), a run up to one of its cycles for a fork
(``_history``), forks read back (``_forks``), the tombstones of pruned runs
(``_pruned``) and a cheap look for tampering (``_tamper``).
"""

from __future__ import annotations

from audit.queries._chain_head import key_problem, parent_problem
from audit.queries._forks import ForkLink, fork_link, fork_links, forks_of, mark_inherited
from audit.queries._gate_rows import UnreadableGate, read_gates, resolve_gate_id
from audit.queries._heads import run_heads
from audit.queries._history import inherited_facts, read_facts, read_history
from audit.queries._lineage import lineage_graph
from audit.queries._pruned import (
    Tombstone,
    pruned_note,
    read_tombstone,
    read_tombstones,
    tombstone_digest,
    tombstone_problem,
)
from audit.queries._queries import (
    CANDIDATES,
    DEFAULT_LIMIT,
    RunFilter,
    RunRow,
    StoredEvent,
    UnreadableRun,
    events_in,
    get_run,
    list_runs,
    parse_since,
    read_events,
    read_runs,
    resolve_run_id,
    run_in,
)
from audit.queries._tamper import tamper_hint
from audit.queries._timeline import CycleSummary, last_budget_status, timeline

__all__ = [
    "CANDIDATES",
    "DEFAULT_LIMIT",
    "CycleSummary",
    "ForkLink",
    "RunFilter",
    "RunRow",
    "StoredEvent",
    "Tombstone",
    "UnreadableGate",
    "UnreadableRun",
    "events_in",
    "fork_link",
    "fork_links",
    "forks_of",
    "get_run",
    "inherited_facts",
    "key_problem",
    "last_budget_status",
    "lineage_graph",
    "list_runs",
    "mark_inherited",
    "parent_problem",
    "parse_since",
    "pruned_note",
    "read_events",
    "read_facts",
    "read_gates",
    "read_history",
    "read_runs",
    "read_tombstone",
    "read_tombstones",
    "resolve_gate_id",
    "resolve_run_id",
    "run_heads",
    "run_in",
    "tamper_hint",
    "timeline",
    "tombstone_digest",
    "tombstone_problem",
]
