"""The ledger as an RFC 6962 Merkle tree: signed heads and consistency (docs/audit-format.md).

Leaf ``i`` (from 0) of the ledger's tree is ``sha256(0x00 ‖ canonical JSON of
{head, last_seq, run_id, seq})`` of the entry ``seq = i + 1``, the same JSON the
ledger's own chain hashes (:func:`engine.hashing.ledger.entry_message`). The tree is
computed from the ``ledger`` rows when a head is taken (``converge anchor``,
``converge export --proof``), never inside a run's commit. A signed head is the
statement ``{"type": "converge.ledger_head/1", "size", "root", "ts"}`` (and
``"keyed"``, the key's fingerprint, in a keyed store: :mod:`audit.ledger._anchors`) signed with
the store's Ed25519 key (:mod:`audit.signing._statements`) and kept in the ``signatures`` table.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from audit.core import StoreCore
from audit.ledger._ledger import verify_ledger
from audit.signing import (
    Signer,
    canonical,
    check_signature,
    ensure_signature_tables,
    keep_statement,
    stored_statement,
    stored_statements,
)
from audit.tables import ledger
from engine.errors import ConvergeError, LedgerForked
from engine.hashing.ledger import entry_message, key_fingerprint
from engine.hashing.merkle import EMPTY, leaf_hash
from engine.hashing.proofs import MerkleTree, verify_consistency

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

HEAD_TYPE = "converge.ledger_head/1"
"""The ``type`` of a signed ledger head."""


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """One ledger row, as its tree leaf hashes it."""

    seq: int
    run_id: str
    last_seq: int
    head: str

    def message(self) -> str:
        """The canonical JSON the leaf hashes (:func:`engine.hashing.ledger.entry_message`)."""
        return entry_message(self.seq, self.run_id, self.last_seq, self.head)

    def to_json(self) -> dict[str, Any]:
        """``{"seq", "run_id", "last_seq", "head"}``."""
        return {
            "seq": self.seq,
            "run_id": self.run_id,
            "last_seq": self.last_seq,
            "head": self.head,
        }


def ledger_entries(store: StoreCore) -> list[LedgerEntry]:
    """Every ledger row in ``seq`` order; ``ConvergeError`` when a seq is missing."""
    with store.transaction(write=False) as conn:
        rows = conn.execute(
            select(ledger.c.seq, ledger.c.run_id, ledger.c.last_seq, ledger.c.head).order_by(
                ledger.c.seq
            )
        ).all()
    entries = [LedgerEntry(r[0], r[1], r[2], r[3]) for r in rows]
    for expected, entry in enumerate(entries, 1):
        if entry.seq != expected:
            raise ConvergeError(f"ledger entry {expected} is missing in {store.shown}")
    return entries


def ledger_tree(entries: list[LedgerEntry]) -> MerkleTree:
    """The RFC 6962 tree over the ledger entries."""
    return MerkleTree([leaf_hash(e.message().encode()) for e in entries])


def parse_head(text: str) -> dict[str, Any]:
    """A signed head as ``converge anchor`` prints it (or a file holding it) → its dict.

    Raises ``ValueError`` naming what is wrong.
    """
    try:
        head = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not a signed head (JSON as `converge anchor` prints): {exc}") from exc
    if not isinstance(head, dict) or head.get("type") != HEAD_TYPE:
        raise ValueError(f"not a signed ledger head (type {HEAD_TYPE!r})")
    size, root = head.get("size"), head.get("root")
    if type(size) is not int or size < 0 or not isinstance(root, str) or len(root) != 64:
        raise ValueError("a signed head needs an integer size and a 64-digit hex root")
    return head


def signed_head(
    store: StoreCore, signer: Signer, tree: MerkleTree | None = None, size: int | None = None
) -> dict[str, Any]:
    """The signed head of the ledger as it is now (or of its first ``size`` entries),
    kept in the store (unless it is opened to read); the head kept for the same
    size and key is reused (``converge anchor`` twice prints one line).

    Raises ``LedgerForked`` when the ledger's root at that size is not the one
    signed before (the ledger was rewritten), ``StoreError`` when the database fails.
    """
    if tree is None:
        tree = ledger_tree(ledger_entries(store))
    size = tree.size if size is None else size
    root = tree.root(size).hex()
    ensure_signature_tables(store)
    with store.transaction(write=not store.read_only) as conn:
        kept = stored_statement(conn, "ledger_head", str(size), signer.key_id)
        if kept is not None:
            if kept.get("root") != root:
                raise LedgerForked(
                    f"the ledger of {store.shown} has root {root} at size {size}, but the "
                    f"head signed at that size says {kept.get('root')}: the ledger was rewritten"
                )
            return kept
        ts = int(time.time())
        statement: dict[str, Any] = {"type": HEAD_TYPE, "size": size, "root": root, "ts": ts}
        keyed = store.known_fingerprint or (
            None if store.key is None else key_fingerprint(store.key)
        )
        if keyed is not None:  # a keyed store says so where a writer cannot remove it
            statement["keyed"] = keyed
        signed = signer.sign(statement)
        if not store.read_only:  # a store opened to read keeps nothing
            keep_statement(conn, "ledger_head", str(size), signed)
    return signed


def head_line(signed: dict[str, Any]) -> str:
    """The signed head as one line without spaces (canonical JSON)."""
    return canonical(signed)


@dataclass(frozen=True, slots=True)
class ConsistencyReport:
    """Whether the ledger only grew from one signed head to another, and if not where."""

    ok: bool
    size1: int
    size2: int
    proof: list[str]
    detail: str

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready dict."""
        return {
            "ok": self.ok,
            "from": self.size1,
            "to": self.size2,
            "proof": self.proof,
            "detail": self.detail,
        }


def check_consistency(
    store: StoreCore, head1: dict[str, Any], head2: dict[str, Any], public: Ed25519PublicKey
) -> ConsistencyReport:
    """Check both signatures, then the RFC 6962 consistency proof (computed from the
    store's ledger) from ``head1`` to ``head2``; a failure names where the ledger
    forked: the last size whose signed root still matches, the first that does not."""
    size1, size2 = head1["size"], head2["size"]

    def report(ok: bool, detail: str, proof: list[bytes] | None = None) -> ConsistencyReport:
        return ConsistencyReport(ok, size1, size2, [p.hex() for p in proof or []], detail)

    for name, head in (("HEAD1", head1), ("HEAD2", head2)):
        why = check_signature(public, head)
        if why is not None:
            return report(False, f"{name}: {why}")
    if size1 > size2:
        return report(False, f"HEAD1 (size {size1}) is later than HEAD2 (size {size2})")
    entries = ledger_entries(store)
    tree = ledger_tree(entries)
    if size2 > tree.size:
        return report(False, f"the store's ledger has {tree.size} entries, HEAD2 says {size2}")
    proof = tree.consistency_proof(size1, size2)
    root1, root2 = bytes.fromhex(head1["root"]), bytes.fromhex(head2["root"])
    if size1 == 0 and root1 == EMPTY:  # every ledger extends the empty one
        return report(True, f"the ledger of {size2} entries extends the empty ledger")
    if verify_consistency(size1, size2, proof, root1, root2):
        return report(True, f"the ledger of {size2} entries extends the ledger of {size1}", proof)
    return report(False, _fork(store, tree, [head1, head2], public), proof)


def _fork(
    store: StoreCore, tree: MerkleTree, heads: list[dict[str, Any]], public: Ed25519PublicKey
) -> str:
    """Where the store's ledger departs from what the signed heads say: bracketed by
    the given heads and every head of this key kept in the store, and the first
    entry the ledger's own chain finds changed."""
    known = {h["size"]: h["root"] for h in heads}
    for h in stored_statements(store, "ledger_head"):
        if h.get("type") == HEAD_TYPE and check_signature(public, h) is None:
            known.setdefault(h["size"], h["root"])
    matches = [s for s, r in known.items() if s <= tree.size and tree.root(s).hex() == r]
    differs = [s for s, r in known.items() if s <= tree.size and tree.root(s).hex() != r]
    good = max([s for s in matches if not differs or s < min(differs)], default=0)
    where = (
        f"ledger forked after entry {good}, at or before entry {min(differs)}"
        if differs
        else "the signed roots do not fit one ledger"
    )
    for name, h in (("HEAD1", heads[0]), ("HEAD2", heads[1])):
        if h["size"] in differs:
            where += f"; {name} (size {h['size']}) no longer matches the store's ledger"
    with store.transaction(write=False) as conn:
        state = verify_ledger(conn, store.chain_hash)
    if not state.report.ok:
        where += (
            f"; the ledger's chain: {state.report.reason} at entry {state.report.first_bad_seq}"
        )
    return where
