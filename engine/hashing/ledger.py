"""The store-wide ledger of run heads: its entries' message, its anchor, the key's fingerprint.

Each ledger entry ``(seq, run_id, last_seq, head)`` is hashed as :func:`entry_message`
twice: chained onto the previous entry with the run chains' function
(:func:`engine.hashing.chain.hasher`: sha256, or HMAC under the key), and as leaf
``seq - 1`` of the ledger's RFC 6962 tree (:func:`engine.hashing.merkle.leaf_hash`),
whose root signed heads sign. An anchor is the chained head ``seq:hash``.
:func:`key_fingerprint` names the HMAC key without revealing it. Pinned by
``tests/vectors/ledger.json``, ``ledger-tree.json`` and ``key-fingerprint.json``.
"""

from __future__ import annotations

import hashlib
import hmac
import json

__all__ = ["entry_message", "key_fingerprint", "parse_anchor"]


def key_fingerprint(key: bytes) -> str:
    """A fingerprint that identifies the key without revealing it (HMAC of a constant)."""
    return hmac.new(key, b"converge audit key fingerprint", hashlib.sha256).hexdigest()[:32]


def entry_message(seq: int, run_id: str, last_seq: int, head: str) -> str:
    """The canonical JSON of one ledger entry (sorted keys, compact)."""
    return json.dumps(
        {"head": head, "last_seq": last_seq, "run_id": run_id, "seq": seq},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )


def parse_anchor(text: str) -> tuple[int, str]:
    """``"seq:hash"`` → (seq, hash); raises ``ValueError`` for anything else."""
    seq, sep, digest = text.strip().partition(":")
    if not sep or not seq.isdigit() or len(digest) != 64:
        raise ValueError(f"{text!r} is not a ledger anchor (seq:hash, as `converge anchor` prints)")
    return int(seq), digest
