"""The ledger's checkpoints in the C2SP tlog-checkpoint format (docs/audit-format.md).

A checkpoint is a signed note (:mod:`audit.signing._notes`) whose text is three
lines: the origin (the log's name: by default the store's own,
``converge/store-`` and 16 hex digits drawn once and kept in ``converge_meta``),
the tree size in decimal, and the base64 root of the ledger's RFC 6962 tree at that
size (:mod:`audit.ledger._tree`, the tree the signed heads sign). Ed25519 is
deterministic, so the same store, size and key give the same bytes every time.
Taking a checkpoint also keeps the signed head of that size (the same root, as
JSON) and the note itself (:func:`kept_checkpoint` reads the last one back, with no
key: ``converge checkpoint`` prints it), and refuses to sign a tree that no longer
extends every head the key signed before (a log never signs two inconsistent
checkpoints).

A consistency proof travels as a file of base64 hashes, one a line (the order of
RFC 9162 §2.1.4.1), as witnesses take it.
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
from dataclasses import dataclass

from sqlalchemy import insert, inspect, select

from audit.core import StoreCore
from audit.ledger._tree import HEAD_TYPE, ledger_entries, ledger_tree, signed_head
from audit.signing import (
    Note,
    Signer,
    ensure_signature_tables,
    keep_statement,
    parse_note,
    sign_note,
    stored_statement,
    stored_statements,
)
from audit.tables import meta, signatures
from engine.errors import CheckpointError, LedgerForked, StoreError
from engine.hashing.merkle import EMPTY
from engine.hashing.proofs import MerkleTree, verify_consistency

__all__ = [
    "ORIGIN",
    "Checkpoint",
    "checkpoint_note",
    "consistency_proof",
    "consistent",
    "format_proof",
    "kept_checkpoint",
    "parse_checkpoint",
    "parse_proof",
    "store_origin",
]

ORIGIN = "checkpoint_origin"
"""``converge_meta`` key of the store's default checkpoint origin."""
KEPT_NOTE = "checkpoint_note"
"""``signatures.kind`` of a checkpoint note kept as signed (``subject``: ``SIZE ORIGIN``)."""


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A checkpoint's text: ``origin``, tree ``size``, 32-byte RFC 6962 ``root``."""

    origin: str
    size: int
    root: bytes

    def text(self) -> str:
        """The note text: ``ORIGIN\\nSIZE\\nBASE64(ROOT)\\n``."""
        return f"{self.origin}\n{self.size}\n{base64.b64encode(self.root).decode()}\n"


def parse_checkpoint(data: str) -> tuple[Checkpoint, Note]:
    """A checkpoint note's text → (its three lines, the note); extension lines are
    kept in the note's text and otherwise ignored.

    Raises ``CheckpointError`` for a note that is none or text that is no checkpoint.
    """
    note = parse_note(data)
    lines = note.text.split("\n")[:-1]
    if len(lines) < 3 or not all(lines):
        raise CheckpointError("not a checkpoint: origin, size and root hash lines expected")
    origin, size, root = lines[:3]
    if not size.isascii() or not size.isdigit() or (size != "0" and size.startswith("0")):
        raise CheckpointError(f"not a checkpoint: tree size {size[:30]!r} is not a decimal")
    try:
        raw = base64.b64decode(root, validate=True)
    except binascii.Error:
        raw = b""
    if len(raw) != 32:
        raise CheckpointError("not a checkpoint: the root hash is not 32 bytes of base64")
    return Checkpoint(origin, int(size), raw), note


def store_origin(store: StoreCore) -> str:
    """The store's default origin, drawn and kept on first use (``StoreError``)."""
    query = select(meta.c.value).where(meta.c.key == ORIGIN)
    with store.transaction(write=False) as conn:
        value = conn.execute(query).scalar()
    if value is not None:
        return str(value)
    drawn = f"converge/store-{secrets.token_hex(8)}"
    if store.read_only:  # a store opened to read keeps nothing: this origin is this export's
        return drawn
    try:
        with store.transaction() as conn:
            conn.execute(insert(meta).values(key=ORIGIN, value=drawn))
    except StoreError:
        pass  # another process drew it first (a duplicate key): theirs is kept
    with store.transaction(write=False) as conn:
        value = conn.execute(query).scalar()
    if value is None:
        raise StoreError(f"audit store {store.shown}: cannot keep the checkpoint origin")
    return str(value)


def _refuse_fork(store: StoreCore, tree: MerkleTree, key_id: str) -> None:
    """``LedgerForked`` when a head this key signed before is not a prefix of ``tree``."""
    for head in stored_statements(store, "ledger_head"):
        if head.get("type") != HEAD_TYPE or head.get("key_id") != key_id:
            continue
        size = head.get("size")
        if (
            not isinstance(size, int)
            or size > tree.size
            or tree.root(size).hex() != head.get("root")
        ):
            raise LedgerForked(
                f"the ledger of {store.shown} does not extend the head of size {size} this key "
                "signed before: it was rewritten, and no checkpoint is signed"
            )


def checkpoint_note(
    store: StoreCore,
    signer: Signer,
    origin: str | None = None,
    size: int | None = None,
    tree: MerkleTree | None = None,
) -> Note:
    """The signed checkpoint of the ledger as it is now (or of its first ``size``
    entries), under ``origin`` (default :func:`store_origin`); the signed head of
    that size is kept in the store. ``tree``: the ledger's, when the caller has it.

    Raises ``LedgerForked`` (see above), ``CheckpointError`` for an origin with a
    space, a plus or a newline, ``ValueError`` for a size past the ledger's.
    """
    origin = store_origin(store) if origin is None else origin
    if not origin or any(c.isspace() for c in origin) or "+" in origin:
        raise CheckpointError(f"origin {origin!r}: one word without spaces or '+' is expected")
    tree = ledger_tree(ledger_entries(store)) if tree is None else tree
    size = tree.size if size is None else size
    _refuse_fork(store, tree, signer.key_id)
    head = signed_head(store, signer, tree, size)
    note = sign_note(Checkpoint(origin, size, bytes.fromhex(head["root"])).text(), signer)
    _keep(store, note, origin, size, signer.key_id)
    return note


def _keep(store: StoreCore, note: Note, origin: str, size: int, key_id: str) -> None:
    """Keep ``note`` as signed, once per size, origin and key (Ed25519 signs the same
    text the same way: a note signed again is the one kept)."""
    if store.read_only:  # a store opened to read keeps nothing
        return
    ensure_signature_tables(store)
    subject = f"{size} {origin}"
    with store.transaction() as conn:
        if stored_statement(conn, KEPT_NOTE, subject, key_id) is None:
            kept = {"key_id": key_id, "origin": origin, "size": size, "note": note.render()}
            keep_statement(conn, KEPT_NOTE, subject, kept)


def kept_checkpoint(store: StoreCore, origin: str | None = None) -> str | None:
    """The last checkpoint note kept in the store (the largest size, then the newest;
    of ``origin`` when given), as signed; None when none was ever signed. Needs no
    key. Raises ``StoreError``."""
    with store.transaction(write=False) as conn:
        if not inspect(conn).has_table(signatures.name):
            return None
        s = signatures.c
        rows = conn.execute(
            select(s.statement).where(s.kind == KEPT_NOTE).order_by(s.created_at)
        ).scalars()
        notes = [json.loads(r) for r in rows]
    found = [n for n in notes if origin is None or n.get("origin") == origin]
    if not found:
        return None
    # the largest size; of that size, the last kept (found is oldest first)
    _, last = max(enumerate(found), key=lambda item: (int(item[1].get("size", -1)), item[0]))
    return str(last["note"])


def consistency_proof(store: StoreCore, size1: int, size2: int) -> list[bytes]:
    """The RFC 9162 proof that the ledger's first ``size1`` entries are a prefix of its
    first ``size2`` (``ValueError`` for sizes out of order or past the ledger's)."""
    return ledger_tree(ledger_entries(store)).consistency_proof(size1, size2)


def consistent(old: Checkpoint, new: Checkpoint, proof: list[bytes]) -> str | None:
    """Why ``new`` does not extend ``old`` (the same origin, and the RFC 9162
    consistency ``proof`` from ``old``'s size to ``new``'s), or None when it does.
    From the empty tree every tree follows: its root must be the empty tree's."""
    if old.origin != new.origin:
        return f"origin {new.origin!r} is not {old.origin!r}"
    if old.size > new.size:
        return f"size {new.size} is smaller than the size {old.size} cosigned before"
    if old.size == 0:
        if old.root != EMPTY or proof:
            return "a checkpoint of size 0 has the empty tree's root and needs no proof"
        return None
    if not verify_consistency(old.size, new.size, proof, old.root, new.root):
        return f"the proof does not show size {old.size} extended to size {new.size}"
    return None


def format_proof(proof: list[bytes]) -> str:
    """A proof as a file's text: one base64 hash a line."""
    return "".join(base64.b64encode(p).decode() + "\n" for p in proof)


def parse_proof(text: str) -> list[bytes]:
    """A proof file's text → its hashes; ``CheckpointError`` for a line that is not
    a base64 32-byte hash."""
    proof = []
    for n, line in enumerate(text.splitlines(), 1):
        try:
            raw = base64.b64decode(line.strip(), validate=True)
        except binascii.Error:
            raw = b""
        if len(raw) != 32:
            raise CheckpointError(f"proof line {n} is not a base64 32-byte hash")
        proof.append(raw)
    return proof
