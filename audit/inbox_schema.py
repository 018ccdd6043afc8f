"""Creating the approval inbox's tables (``api_tokens``, ``gate_votes``) on first use.

They are not part of the schema version check: a store made before the inbox
existed gains them the first time a token is added or a vote cast.
"""

from __future__ import annotations

from sqlalchemy import text

from audit.store import SqlRunStore
from audit.tables import INBOX_TABLES

_READY_ATTR = "_converge_inbox_tables_ready"


def ensure_inbox_tables(store: SqlRunStore) -> None:
    """Create the inbox tables that are missing (once per store object).

    Raises ``StoreError`` when the database fails.
    """
    if getattr(store, _READY_ATTR, False):
        return
    with store._tx() as conn:
        if store._pg:
            # two processes creating the tables at once: one waits for the other
            conn.execute(text("SELECT pg_advisory_xact_lock(714523)"))
        for table in INBOX_TABLES:
            table.create(conn, checkfirst=True)
    setattr(store, _READY_ATTR, True)
