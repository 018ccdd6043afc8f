"""The audit store: SQLAlchemy tables, a hash-chained trail, queries and lineage.

``open_store(url)`` gives a :class:`SqlRunStore` (SQLite WAL file by default, any
SQLAlchemy URL) implementing :class:`engine.RunStore`; ``verify`` finds the first
altered row of a run's chain (docs/audit.md).

Its rooms, each behind its face (its ``__init__``; no room imports another's
private modules, tests/test_rooms.py), from the top layer down (each imports only
those below it, the import-linter contract in pyproject.toml):

- :mod:`audit.people` (who decides: people, groups, tokens, votes, the access log),
  :mod:`audit.run_queue` (runs as a service: queued, taken, requeued),
  :mod:`audit.notifications` (the outbox of gate notifications),
  :mod:`audit.retention` (``converge prune``: tombstones in the ledger),
  :mod:`audit.redaction` (``converge redact``: a fact's content erased, its commitment kept);
- :mod:`audit.store`: :class:`SqlRunStore`, the rooms composed into
  :class:`engine.RunStore`;
- :mod:`audit.verify` (a run's chain, its checkpoint, its gates, the ledger) and
  :mod:`audit.proofs` (proof bundles of a run or a fact, checked offline);
- :mod:`audit.ledger`: the store-wide ledger of run heads, its checkpoints,
  anchors and witnesses;
- :mod:`audit.signing`: Ed25519 signed statements, notes and known people;
- :mod:`audit.queries`: what the store answers (runs, events, facts, gates,
  lineage, timelines, forks, tombstones);
- :mod:`audit.trail`: a run's hash-chained events, checkpoints, gates and claims;
- :mod:`audit.core`: the store's shared state; :mod:`audit.writing`: how it
  writes (the writer thread, bulk inserts, leases).

Beside them: :mod:`audit.tables` and :mod:`audit.schema` (the tables and their
upgrades), :mod:`audit.shadows` (reading an older store without writing),
:mod:`audit.cells` (stored cells checked before reading), :mod:`audit.settings`,
:mod:`audit.url`, :mod:`audit.testing` (fault injection) and :mod:`audit.models`
(typed read models, extra ``models``).
"""

from audit.queries import RunRow, StoredEvent, lineage_graph, parse_since
from audit.redaction import Redaction, redact_fact
from audit.store import KEY_ENV, SqlRunStore, open_store
from audit.tables import SCHEMA_VERSION
from audit.trail import GENESIS, VerifyReport, verify_chain
from audit.url import resolve_url
from engine.facts import canonical_json

__all__ = [
    "GENESIS",
    "KEY_ENV",
    "SCHEMA_VERSION",
    "Redaction",
    "RunRow",
    "SqlRunStore",
    "StoredEvent",
    "VerifyReport",
    "canonical_json",
    "lineage_graph",
    "open_store",
    "parse_since",
    "redact_fact",
    "resolve_url",
    "verify_chain",
]
