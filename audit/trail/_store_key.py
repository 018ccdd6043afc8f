"""The key a writer holds, checked before it writes (docs/audit.md, "Trust model").

A keyed store records a fingerprint of its HMAC key (``converge_meta``
``key_fingerprint``, :func:`engine.hashing.ledger.key_fingerprint`). A process writing to it
without the key, or with another one, would chain its rows with the wrong hash and
break the run's chain and every later ledger entry for good, indistinguishable from
tampering. So every path that writes (a run's start, a claim to resume, a gate's
decision or vote, deadline expiry, ``converge serve`` and ``converge worker`` at
start) calls :func:`require_key` first and refuses with :class:`AuditKeyError`,
nothing written.
"""

from __future__ import annotations

from sqlalchemy import select

from audit.core import StoreCore
from audit.tables import meta
from engine.errors import AuditKeyError
from engine.hashing.ledger import key_fingerprint

__all__ = [
    "KEY_FINGERPRINT",
    "KEY_REQUIRED",
    "WRONG_KEY",
    "AuditKeyError",
    "key_problem",
    "keyed_as",
    "require_key",
    "stored_fingerprint",
]

KEY_FINGERPRINT = "key_fingerprint"
"""``converge_meta`` key: a fingerprint of the HMAC key (never the key itself)."""

KEY_REQUIRED = "key required"
"""The problem of a process without a key writing to (or verifying) a keyed store."""

WRONG_KEY = "wrong key"
"""The problem of a process whose key is not the one the store was written with."""


def stored_fingerprint(store: StoreCore) -> str | None:
    """The key fingerprint the store records now (read from the database), or None."""
    # one row of converge_meta: no need to wait for the writer thread's batches
    with store.transaction(write=False, settle=False, single=True) as conn:
        value = conn.execute(select(meta.c.value).where(meta.c.key == KEY_FINGERPRINT)).scalar()
    return None if value is None else str(value)


def keyed_as(store: StoreCore) -> str | None:
    """The fingerprint of the key the store is keyed with (as opened: its recorded
    fingerprint, else this process's key's), or None for a plain store."""
    if store.known_fingerprint is not None:
        return store.known_fingerprint
    return None if store.key is None else key_fingerprint(store.key)


def key_problem(store: StoreCore) -> tuple[str, str] | None:
    """(problem, the store's fingerprint) when this process's key does not fit the
    store, else None. A store not known as keyed when it was opened is read again:
    another process may have keyed it since."""
    stored = store.known_fingerprint
    if stored is None:
        stored = stored_fingerprint(store)
        if stored is None:
            return None
        store.known_fingerprint = stored
    if store.key is None:
        return KEY_REQUIRED, stored
    if key_fingerprint(store.key) != stored:
        return WRONG_KEY, stored
    return None


def require_key(store: StoreCore, action: str) -> None:
    """Refuse ``action`` (words for the message: "approving gate G") unless this
    process holds the store's key; raises :class:`AuditKeyError` naming the store,
    the action and the fix. A plain store, or the right key, passes."""
    found = key_problem(store)
    if found is None:
        return
    problem, stored = found
    if problem == KEY_REQUIRED:
        why = "CONVERGE_AUDIT_KEY is not set"
    else:
        assert store.key is not None
        why = (
            f"CONVERGE_AUDIT_KEY is not its key (yours has fingerprint "
            f"{key_fingerprint(store.key)})"
        )
    raise AuditKeyError(
        f"{problem}: audit store {store.shown} is keyed (key fingerprint {stored}) and "
        f"{why}; refused {action}, nothing was written. Set CONVERGE_AUDIT_KEY to the "
        "store's key.",
        problem,
    )
