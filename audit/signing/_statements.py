"""Ed25519 signatures over the store's statements (docs/audit-format.md).

``converge keys generate`` writes ``converge.key`` (PEM PKCS#8, mode 0600) and
``converge.pub`` (PEM SubjectPublicKeyInfo). Signing is on when
``$CONVERGE_SIGNING_KEY`` (or ``--signing-key``) names the private key file.

A signed statement is one JSON object: its fields, ``key_id`` (the first 16 hex
digits of the sha256 of the raw 32-byte public key) and ``sig``, the hex Ed25519
signature of the canonical JSON (sorted keys, compact, UTF-8) of every other
field. Signed statements are kept in the ``signatures`` table, created on first use.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, insert, inspect, select

from audit.core import SIGNING_KEY_ENV, StoreCore
from audit.tables import SIGNATURE_TABLES, runs, signatures
from engine.errors import SigningKeyError

if TYPE_CHECKING:  # cryptography is imported where a key is used, not by every reader
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

__all__ = [
    "KEY_FILE",
    "PUB_FILE",
    "SIGNING_KEY_ENV",
    "Signer",
    "SigningKeyError",
    "canonical",
    "check_signature",
    "generate_keys",
    "key_id",
    "load_public_key",
    "load_signer",
    "signer_from_env",
]

KEY_FILE = "converge.key"
PUB_FILE = "converge.pub"

canonical: Callable[[Any], str] = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
).encode
"""The canonical JSON text of a statement: sorted keys, compact, UTF-8 kept."""


def key_id(public: Ed25519PublicKey) -> str:
    """The first 16 hex digits of the sha256 of the raw 32-byte public key."""
    from cryptography.hazmat.primitives import serialization

    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


class Signer:
    """An Ed25519 private key that signs statements (:meth:`sign`)."""

    def __init__(self, private: Ed25519PrivateKey) -> None:
        self._private = private
        self.public = private.public_key()
        self.key_id = key_id(self.public)

    def sign(self, statement: dict[str, Any]) -> dict[str, Any]:
        """``statement`` with ``key_id`` and ``sig`` added (``ValueError`` for a
        statement that is not JSON)."""
        body = {k: v for k, v in statement.items() if k != "sig"}
        body["key_id"] = self.key_id
        body["sig"] = self._private.sign(canonical(body).encode()).hex()
        return body

    def sign_bytes(self, message: bytes) -> bytes:
        """The 64-byte Ed25519 signature of ``message`` (a note's text, a cosigned message)."""
        return self._private.sign(message)


def generate_keys(directory: Path) -> tuple[Path, Path]:
    """Write a new key pair into ``directory`` (created if missing); returns the
    (private, public) paths. Raises ``SigningKeyError`` when either file exists."""
    key_path, pub_path = directory / KEY_FILE, directory / PUB_FILE
    for path in (key_path, pub_path):
        if path.exists():
            raise SigningKeyError(f"{path} exists already: a key is never overwritten")
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    directory.mkdir(parents=True, exist_ok=True)
    private = Ed25519PrivateKey.generate()
    pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
    pub_path.write_bytes(
        private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return key_path, pub_path


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise SigningKeyError(f"cannot read the {what} {path}: {exc.strerror or exc}") from exc


def load_signer(path: str | Path) -> Signer:
    """The signer of the PEM PKCS#8 Ed25519 private key at ``path``.

    Raises ``SigningKeyError`` naming the file when it cannot be read or is not one.
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    path = Path(path)
    try:
        private = serialization.load_pem_private_key(_read(path, "signing key"), password=None)
    except (ValueError, TypeError) as exc:
        raise SigningKeyError(f"{path} is not a PEM private key: {exc}") from exc
    if not isinstance(private, Ed25519PrivateKey):
        raise SigningKeyError(f"{path} is not an Ed25519 private key")
    return Signer(private)


def load_public_key(path: str | Path) -> Ed25519PublicKey:
    """The PEM SubjectPublicKeyInfo Ed25519 public key at ``path``.

    Raises ``SigningKeyError`` naming the file when it cannot be read or is not one.
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    path = Path(path)
    try:
        public = serialization.load_pem_public_key(_read(path, "public key"))
    except (ValueError, TypeError) as exc:
        raise SigningKeyError(f"{path} is not a PEM public key: {exc}") from exc
    if not isinstance(public, Ed25519PublicKey):
        raise SigningKeyError(f"{path} is not an Ed25519 public key")
    return public


def signer_from_env(path: str | Path | None = None) -> Signer | None:
    """The signer of ``path``, else of ``$CONVERGE_SIGNING_KEY``, else None."""
    chosen = path if path is not None else os.environ.get(SIGNING_KEY_ENV) or None
    return None if chosen is None else load_signer(chosen)


def check_signature(public: Ed25519PublicKey, signed: dict[str, Any]) -> str | None:
    """Why ``signed`` is not a statement signed by ``public`` (None: it is)."""
    from cryptography.exceptions import InvalidSignature

    sig = signed.get("sig")
    if not isinstance(sig, str):
        return "no signature"
    if signed.get("key_id") != key_id(public):
        return f"signed by key {signed.get('key_id')!r}, not by {key_id(public)!r}"
    body = {k: v for k, v in signed.items() if k != "sig"}
    try:
        public.verify(bytes.fromhex(sig), canonical(body).encode())
    except (InvalidSignature, ValueError):
        return "signature does not verify with the public key"
    return None


# -- the signatures table --------------------------------------------------------------


def ensure_signature_tables(store: StoreCore) -> None:
    """Create the ``signatures`` table when missing (once per store object)."""
    store.ensure_tables(SIGNATURE_TABLES, 714524)


def stored_statement(conn: Connection, kind: str, subject: str, kid: str) -> dict[str, Any] | None:
    """The signed statement kept for (kind, subject, key id), or None."""
    row = conn.execute(
        select(signatures.c.statement).where(
            signatures.c.kind == kind, signatures.c.subject == subject, signatures.c.key_id == kid
        )
    ).scalar()
    return None if row is None else dict(json.loads(row))


def stored_statements(store: StoreCore, kind: str) -> list[dict[str, Any]]:
    """Every signed statement of ``kind`` kept in the store (none when the table is missing)."""
    with store.transaction(write=False) as conn:
        if not inspect(conn).has_table(signatures.name):
            return []
        rows = conn.execute(select(signatures.c.statement).where(signatures.c.kind == kind))
        return [dict(json.loads(r)) for r in rows.scalars()]


def keep_statement(conn: Connection, kind: str, subject: str, signed: dict[str, Any]) -> None:
    """Insert a signed statement (the caller's transaction)."""
    conn.execute(
        insert(signatures).values(
            kind=kind,
            subject=subject,
            key_id=signed["key_id"],
            statement=canonical(signed),
            created_at=time.time(),
        )
    )


def sign_facts_root(store: StoreCore, signer: Signer, run_id: str) -> dict[str, Any] | None:
    """Sign and keep the run's final facts root (``kind`` ``facts_root``), replacing an
    earlier one of the same key (a resumed run stops again). None for a run with no
    facts root recorded."""
    ensure_signature_tables(store)
    with store.transaction() as conn:
        row = conn.execute(
            select(runs.c.facts_root, runs.c.facts_count).where(runs.c.run_id == run_id)
        ).one_or_none()
        if row is None or row.facts_root is None:
            return None
        signed = signer.sign(
            {
                "type": "converge.facts_root/1",
                "run_id": run_id,
                "facts_root": row.facts_root,
                "facts_count": row.facts_count,
                "ts": int(time.time()),
            }
        )
        conn.execute(
            signatures.delete().where(
                signatures.c.kind == "facts_root",
                signatures.c.subject == run_id,
                signatures.c.key_id == signer.key_id,
            )
        )
        keep_statement(conn, "facts_root", run_id, signed)
    return signed
