"""What the audit store answers: recorded runs and events as frozen values
(``_queries``), gates listed with the ones that cannot be read marked
(``_gate_rows``), a run's story per cycle (``_timeline``), a fact's lineage as a
networkx graph (``_lineage``), a run up to one of its cycles for a fork
(``_history``), forks read back (``_forks``), the tombstones of pruned runs
(``_pruned``) and a cheap look for tampering (``_tamper``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from audit.lazy import face

if TYPE_CHECKING:
    from audit.queries._forks import (
        ForkLink,
        fork_link,
        fork_links,
        forks_of,
        mark_inherited,
    )
    from audit.queries._gate_rows import (
        UnreadableGate,
        read_gates,
        resolve_gate_id,
    )
    from audit.queries._heads import run_heads
    from audit.queries._lineage import (
        lineage_graph,
    )
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
        RunRow,
        StoredEvent,
        UnreadableRun,
        read_runs,
    )
    from audit.queries._tamper import (
        tamper_hint,
    )
    from audit.queries._timeline import (
        last_budget_status,
        timeline,
    )

__all__ = [
    "CANDIDATES",
    "ForkLink",
    "RunRow",
    "StoredEvent",
    "Tombstone",
    "UnreadableGate",
    "UnreadableRun",
    "fork_link",
    "fork_links",
    "forks_of",
    "last_budget_status",
    "lineage_graph",
    "mark_inherited",
    "pruned_note",
    "read_gates",
    "read_runs",
    "read_tombstone",
    "read_tombstones",
    "resolve_gate_id",
    "run_heads",
    "tamper_hint",
    "timeline",
    "tombstone_digest",
    "tombstone_problem",
]

if not TYPE_CHECKING:
    __getattr__ = face(
        __name__,
        __all__,
        (
            "_forks",
            "_gate_rows",
            "_heads",
            "_lineage",
            "_pruned",
            "_queries",
            "_tamper",
            "_timeline",
        ),
    )
