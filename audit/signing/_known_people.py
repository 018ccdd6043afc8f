"""The people a store knows (``converge user add NAME [--public-key FILE]``).

Once anyone is registered, a decision's ``--by`` must name a known person
(``converge.governance``); a person may register an Ed25519 public key (PEM
SubjectPublicKeyInfo, as ``converge keys generate`` writes), against which
``verify`` checks every decision they signed (:mod:`audit.signing._decisions`).
The ``people`` table is created on first use, like the inbox's tables.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import Column, Connection, Double, String, Table, Text, insert, select, update

from audit.core import StoreCore
from audit.signing._statements import SigningKeyError, key_id
from audit.tables import METADATA
from engine.errors import ConfigurationError

if TYPE_CHECKING:  # cryptography is imported where a key is used
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

__all__ = [
    "Person",
    "add_person",
    "anyone_in",
    "anyone_registered",
    "ensure_people_table",
    "people",
    "person",
    "person_in",
    "public_key_from_pem",
    "public_keys",
    "ready_to_read",
]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,99}$")
"""A person's name: the same as a token's (``audit.people._tokens``)."""


people_table = Table(
    "people",
    METADATA,
    Column("name", String(200), primary_key=True),
    Column("public_key", Text, nullable=True),
    Column("key_id", String(64), nullable=True),
    Column("added_at", Double, nullable=False),
    Column("key_added_at", Double, nullable=True),
)
"""A person the store knows; ``public_key`` (PEM, None: none registered) and its
``key_id`` (:func:`audit.signing._statements.key_id`) check the decisions they sign."""


@dataclass(frozen=True, slots=True)
class Person:
    """A registered person: ``name``, their public key (PEM) and its ``key_id``
    (None when they registered none), when they were added (unix seconds)."""

    name: str
    public_key: str | None
    key_id: str | None
    added_at: float


def ensure_people_table(store: StoreCore) -> None:
    """Create the ``people`` table when missing (once per store object)."""
    store.ensure_tables([people_table], 714526)


def public_key_from_pem(pem: str) -> Ed25519PublicKey:
    """The Ed25519 public key of PEM SubjectPublicKeyInfo text; ``SigningKeyError``
    when it is not one."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        public = serialization.load_pem_public_key(pem.encode("utf-8"))
    except (ValueError, TypeError) as exc:
        raise SigningKeyError(f"not a PEM public key: {exc}") from exc
    if not isinstance(public, Ed25519PublicKey):
        raise SigningKeyError("not an Ed25519 public key")
    return public


def add_person(store: StoreCore, name: str, public_key: str | None = None) -> Person:
    """Register ``name`` (already known: kept), with ``public_key`` (PEM text) when
    given, replacing the one they had. Raises ``ConfigurationError`` for a bad name,
    ``SigningKeyError`` for a key that is not an Ed25519 public key, ``StoreError``."""
    if not _NAME.match(name or ""):
        raise ConfigurationError(
            f"person name {name!r} must be 1-100 letters, digits or . _ @ - "
            "(starting with a letter or digit)"
        )
    kid = None if public_key is None else key_id(public_key_from_pem(public_key))
    ensure_people_table(store)
    now = time.time()
    with store.transaction() as conn:
        known = conn.execute(
            select(people_table.c.name).where(people_table.c.name == name).with_for_update()
        ).scalar()
        if known is None:
            conn.execute(
                insert(people_table).values(
                    name=name,
                    public_key=public_key,
                    key_id=kid,
                    added_at=now,
                    key_added_at=None if public_key is None else now,
                )
            )
        elif public_key is not None:
            conn.execute(
                update(people_table)
                .where(people_table.c.name == name)
                .values(public_key=public_key, key_id=kid, key_added_at=now)
            )
    found = person(store, name)
    assert found is not None
    return found


def ready_to_read(store: StoreCore) -> bool:
    """Whether the table exists (a read-only store is never given one)."""
    return store.has_table(people_table.name)


def people(store: StoreCore) -> list[Person]:
    """Everyone registered, by name."""
    if not ready_to_read(store):
        return []
    with store.transaction(write=False) as conn:
        rows = conn.execute(select(people_table).order_by(people_table.c.name)).all()
    return [Person(r.name, r.public_key, r.key_id, r.added_at) for r in rows]


def person(store: StoreCore, name: str) -> Person | None:
    """The registered person ``name``, or None."""
    if not ready_to_read(store):
        return None
    with store.transaction(write=False) as conn:
        return person_in(conn, name)


def person_in(conn: Connection, name: str) -> Person | None:
    """:func:`person` read on ``conn`` (a transaction the caller holds; the table exists)."""
    r = conn.execute(select(people_table).where(people_table.c.name == name)).one_or_none()
    return None if r is None else Person(r.name, r.public_key, r.key_id, r.added_at)


def anyone_registered(store: StoreCore) -> bool:
    """True once anyone is registered: ``--by`` must then name a known person."""
    if not ready_to_read(store):
        return False
    with store.transaction(write=False) as conn:
        return anyone_in(conn)


def anyone_in(conn: Connection) -> bool:
    """:func:`anyone_registered` read on ``conn`` (the table exists)."""
    return conn.execute(select(people_table.c.name).limit(1)).first() is not None


def public_keys(store: StoreCore) -> dict[str, Ed25519PublicKey | None]:
    """Every registered person's public key (None: theirs is missing or unreadable)."""
    out: dict[str, Ed25519PublicKey | None] = {}
    for p in people(store):
        if p.public_key is None:
            out[p.name] = None
            continue
        try:
            out[p.name] = public_key_from_pem(p.public_key)
        except SigningKeyError:
            out[p.name] = None
    return out
