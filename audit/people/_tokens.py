"""API tokens of the people who decide gates (``converge token add``, ``converge serve``).

A token is 32 random bytes (URL-safe base64); the store keeps only its sha256,
so a copy of the database lets nobody sign in. Roles (what each may do is the
access policy's, ``converge.access``; docs/access.md): ``admin``, ``runner``,
``approver`` and ``viewer``.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal

from sqlalchemy import insert, select, update

from audit.cells import bad_cell
from audit.people._schema import ensure_inbox_tables, inbox_readable
from audit.store import SqlRunStore
from audit.tables import api_tokens, group_members
from engine.errors import ConfigurationError

Role = Literal["admin", "runner", "approver", "viewer"]
ROLES: tuple[Role, ...] = ("admin", "runner", "approver", "viewer")
TOKEN_PREFIX = "cvg_"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,99}$")


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a token authenticates: the person's ``name``, ``role`` and the ``groups``
    they are in (read with the token, in one statement)."""

    name: str
    role: Role
    groups: frozenset[str] = frozenset()


def token_hash(token: str) -> str:
    """The sha256 hex digest stored for ``token`` (tokens are random: no salt needed)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def add_token(
    store: SqlRunStore, name: str, role: str = "approver", expires_s: float | None = None
) -> str:
    """Create a token for person ``name`` with ``role`` and return it (shown once,
    never stored). A person may hold several tokens: they are one person to a
    quorum and to four-eyes rules. ``expires_s``: seconds until it is refused (None
    = never).

    ``name``: letters, digits and ``._@-``, at most 100 characters. Raises
    ``ConfigurationError`` for a bad name, role or lifetime, ``StoreError`` when
    the database fails.
    """
    if expires_s is not None and expires_s <= 0:
        raise ConfigurationError(f"a token's lifetime must be > 0 seconds, got {expires_s}")
    if not _NAME.match(name or ""):
        raise ConfigurationError(
            f"token name {name!r} must be 1-100 letters, digits or . _ @ - "
            "(starting with a letter or digit)"
        )
    if role not in ROLES:
        raise ConfigurationError(f"token role must be one of {', '.join(ROLES)}, got {role!r}")
    ensure_inbox_tables(store)
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    now = time.time()
    with store.transaction() as conn:
        conn.execute(
            insert(api_tokens).values(
                token_hash=token_hash(token),
                name=name,
                role=role,
                created_at=now,
                expires_at=None if expires_s is None else now + expires_s,
            )
        )
    return token


def revoke_tokens(store: SqlRunStore, name: str) -> int:
    """Revoke every token of person ``name`` at once (sessions included); how many."""
    ensure_inbox_tables(store)
    with store.transaction() as conn:
        done = conn.execute(
            update(api_tokens)
            .where(api_tokens.c.name == name, api_tokens.c.revoked_at.is_(None))
            .values(revoked_at=time.time())
        )
    return int(done.rowcount)


def authenticate(store: SqlRunStore, token: str, now: float | None = None) -> Principal | None:
    """The principal of ``token``, or None when it is unknown, expired or revoked,
    or its row cannot be read (compared by hash; ``now`` in unix seconds, default
    the time now)."""
    if not token or len(token) > 200:
        return None
    if not inbox_readable(store):
        return None
    digest = token_hash(token)
    with store.transaction(write=False, single=True) as conn:
        rows = conn.execute(
            select(
                api_tokens.c.token_hash,
                api_tokens.c.name,
                api_tokens.c.role,
                api_tokens.c.expires_at,
                api_tokens.c.revoked_at,
                group_members.c.group_name,
            )
            .select_from(
                api_tokens.outerjoin(group_members, group_members.c.name == api_tokens.c.name)
            )
            .where(api_tokens.c.token_hash == digest)
        ).all()
    row = rows[0] if rows else None
    # a row edited outside converge (a text in expires_at...) authenticates no one
    if row is None or bad_cell(api_tokens, row._mapping) is not None:
        return None
    if not hmac.compare_digest(row.token_hash, digest):
        return None
    at = time.time() if now is None else now
    if row.revoked_at is not None or (row.expires_at is not None and at >= row.expires_at):
        return None
    groups = frozenset(str(r.group_name) for r in rows if r.group_name is not None)
    for role in ROLES:  # an unknown role (an edited row) authenticates no one
        if row.role == role:
            return Principal(row.name, role, groups)
    return None


def still_valid(store: SqlRunStore, digests: Collection[str], now: float | None = None) -> set[str]:
    """Which of the token hashes ``digests`` still authenticate at ``now`` (unix
    seconds; not revoked, not expired), in one query: open streams and sessions
    end when theirs is missing (a revocation ends them within a second or two)."""
    if not digests:
        return set()
    if not inbox_readable(store):
        return set()
    at = time.time() if now is None else now
    t = api_tokens.c
    q = select(t.token_hash).where(
        t.token_hash.in_(list(digests)),
        t.revoked_at.is_(None),
        (t.expires_at.is_(None)) | (t.expires_at > at),
    )
    with store.transaction(write=False, single=True) as conn:
        return {str(r[0]) for r in conn.execute(q)}


@dataclass(frozen=True, slots=True)
class TokenInfo:
    """A token as ``converge token list`` shows it: whose, its role and its times
    (unix seconds; ``expires_at``/``revoked_at`` None = never). Never the token,
    nor its hash."""

    name: str
    role: str
    created_at: float
    expires_at: float | None
    revoked_at: float | None


def list_tokens(store: SqlRunStore) -> list[TokenInfo]:
    """Every token, by person then age (oldest first). Raises ``StoreError``."""
    if not inbox_readable(store):
        return []
    t = api_tokens.c
    q = select(t.name, t.role, t.created_at, t.expires_at, t.revoked_at).order_by(
        t.name, t.created_at
    )
    with store.transaction(write=False) as conn:
        return [TokenInfo(*row) for row in conn.execute(q)]
