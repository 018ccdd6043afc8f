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
    store.ensure_tables(INBOX_TABLES, INBOX_LOCK, _token_columns, _tokens_upgraded)


def inbox_readable(store: SqlRunStore) -> bool:
    """For a read of the inbox's tables: False when they were never made (nothing to
    read, and a read creates nothing, so that a command's first write is its own and
    a read-only store stays readable); else True, once they are upgraded (a write
    only when a later converge added columns). Raises ``StoreError``."""
    if not store.has_table(api_tokens.name):
        return False
    ensure_inbox_tables(store)
    return True


TOKEN_COLUMNS = ("expires_at", "revoked_at")
"""The token columns a later converge added."""


def _tokens_upgraded(conn: Connection) -> bool:
    """Whether :func:`_token_columns` has nothing to do (read only)."""
    inspector = inspect(conn)
    have = {c["name"] for c in inspector.get_columns(api_tokens.name)}
    indexed = [i["column_names"] for i in inspector.get_indexes("access_log")]
    return set(TOKEN_COLUMNS) <= have and ["client", "ts"] in indexed  # by any name


def _token_columns(conn: Connection) -> None:
    """Tokens made before they could expire or be revoked gain the columns; an
    access log made before failed sign-ins were counted across servers gains the
    index they are counted with."""
    have = {c["name"] for c in inspect(conn).get_columns(api_tokens.name)}
    for column in TOKEN_COLUMNS:
        if column not in have:
            kind = "DOUBLE PRECISION" if conn.dialect.name == "postgresql" else "REAL"
            conn.execute(text(f"ALTER TABLE api_tokens ADD COLUMN {column} {kind}"))
    conn.execute(text("CREATE INDEX IF NOT EXISTS ix_access_log_client ON access_log (client, ts)"))
