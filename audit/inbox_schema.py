"""Creating the approval inbox's tables (tokens, votes, groups, run actors, the
access log) on first use.

They are not part of the schema version check: a store made before the inbox
existed gains them the first time a token is added or a vote cast.
"""

from __future__ import annotations

from sqlalchemy import inspect, text

from audit.store import SqlRunStore
from audit.tables import INBOX_TABLES, api_tokens

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
        # tokens made before they could expire or be revoked gain the columns
        have = {c["name"] for c in inspect(conn).get_columns(api_tokens.name)}
        for column in ("expires_at", "revoked_at"):
            if column not in have:
                kind = "DOUBLE PRECISION" if store._pg else "REAL"
                conn.execute(text(f"ALTER TABLE api_tokens ADD COLUMN {column} {kind}"))
    setattr(store, _READY_ATTR, True)
