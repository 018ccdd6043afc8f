"""The audit store: SQLAlchemy tables, a hash-chained trail, queries and lineage.

``open_store(url)`` gives a :class:`SqlRunStore` (SQLite WAL file by default, any
SQLAlchemy URL) implementing :class:`engine.RunStore`; ``verify`` finds the first
altered row of a run's chain (docs/audit.md, docs/audit.md).
"""

from audit.queries import RunRow, StoredEvent, lineage_graph, parse_since
from audit.store import KEY_ENV, SqlRunStore, open_store
from audit.tables import SCHEMA_VERSION
from audit.trail import GENESIS, VerifyReport, verify_chain
from audit.url import resolve_url
from engine.facts import canonical_json

__all__ = [
    "GENESIS",
    "KEY_ENV",
    "SCHEMA_VERSION",
    "RunRow",
    "SqlRunStore",
    "StoredEvent",
    "VerifyReport",
    "canonical_json",
    "lineage_graph",
    "open_store",
    "parse_since",
    "resolve_url",
    "verify_chain",
]
