"""Creating the approval inbox's tables (tokens, votes, groups, run actors, the
access log) on first use.

They are not part of the schema version check: a store made before the inbox
existed gains them the first time a token is added or a vote cast.
"""

from __future__ import annotations

from sqlalchemy import Connection, inspect, text

from audit.store import SqlRunStore
from audit.tables import INBOX_TABLES, api_tokens

INBOX_LOCK = 714523
"""The PostgreSQL advisory lock taken while the inbox tables are created."""


def ensure_inbox_tables(store: SqlRunStore) -> None:
    """Create the inbox tables that are missing (once per store object).

    Raises ``StoreError`` when the database fails.
    """
    store.ensure_tables(INBOX_TABLES, INBOX_LOCK, _token_columns)


def _token_columns(conn: Connection) -> None:
    """Tokens made before they could expire or be revoked gain the columns; an
    access log made before failed sign-ins were counted across servers gains the
    index they are counted with."""
    have = {c["name"] for c in inspect(conn).get_columns(api_tokens.name)}
    for column in ("expires_at", "revoked_at"):
        if column not in have:
            kind = "DOUBLE PRECISION" if conn.dialect.name == "postgresql" else "REAL"
            conn.execute(text(f"ALTER TABLE api_tokens ADD COLUMN {column} {kind}"))
    conn.execute(text("CREATE INDEX IF NOT EXISTS ix_access_log_client ON access_log (client, ts)"))
