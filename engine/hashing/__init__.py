"""The hashing core: every hash converge writes, in the standard library only.

The engine, the audit store and the proof bundles hash through these modules (the
independent verifier, ``examples/verify_bundle.py``, re-implements them from
docs/audit-format.md and is checked against them). Each hash is pinned by fixed
digests in ``tests/vectors/`` (read by ``tests/test_hash_vectors.py``): a change
of the bytes hashed fails there instead of re-hashing every store silently.

- :mod:`~engine.hashing.canonical` — canonical JSON text of any value, and of a
  fact (the ``fact_promoted`` payload and the facts tree's leaf data).
  Vectors: ``canonical-json.json``, ``facts-root.json``.
- :mod:`~engine.hashing.chain` — an audit event's message and the chain link
  ``H(prev ‖ message)``, sha256 or HMAC-SHA256 under the store's key.
  Vectors: ``happy-path.json``, ``happy-path-keyed.json``, the tamper cases
  (``payload-bit-flip-@seq3.json``, ``row-deleted-@seq2.json``,
  ``relabelled-plain.json``).
- :mod:`~engine.hashing.merkle` — leaf and node hashes under RFC 6962 or LEGACY
  (no prefixes), roots, a fact's leaf, the facts root, the incremental
  :class:`~engine.hashing.merkle.MerkleFrontier` a run and a checkpoint carry.
  Vectors: ``facts-root.json``, ``rfc6962-roots.json``.
- :mod:`~engine.hashing.proofs` — the whole tree with inclusion and consistency
  proofs and their RFC 9162 checks. Vectors: ``rfc6962-roots.json``,
  ``ledger-tree.json``.
- :mod:`~engine.hashing.ledger` — a ledger entry's message (chained, and the
  ledger tree's leaf), the anchor ``seq:hash``, the key's fingerprint.
  Vectors: ``ledger.json``, ``ledger-tree.json``, ``key-fingerprint.json``.
- :mod:`~engine.hashing.checkpoint` — a checkpoint's digest, a fact chunk's, and
  the chain of chunk digests. Vectors: ``checkpoint-digest.json``.

A store written at schema version 3 (``store-v3.sql``: LEGACY facts trees) still
verifies. Hot paths inline these functions' bytes where a call per fact would show
(``engine._cycle.merge``, the facts' leaves of a resume or an export): they say so.
"""

from engine.hashing.canonical import FactLike, ProvenanceLike, canonical_json, fact_json
from engine.hashing.chain import GENESIS, KEYED, PLAIN, event_message, fact_links, hasher
from engine.hashing.checkpoint import checkpoint_digest, fold_digest
from engine.hashing.ledger import entry_message, key_fingerprint, parse_anchor
from engine.hashing.merkle import (
    EMPTY,
    EMPTY_ROOT,
    LEAF_PREFIX,
    LEGACY,
    NODE_PREFIX,
    RFC6962,
    MerkleFrontier,
    fact_leaf,
    facts_root,
    leaf_hash,
    merkle_scheme,
    node_hash,
    root_of_leaves,
    text_leaves,
)
from engine.hashing.proofs import MerkleTree, verify_consistency, verify_inclusion

__all__ = [
    "EMPTY",
    "EMPTY_ROOT",
    "GENESIS",
    "KEYED",
    "LEAF_PREFIX",
    "LEGACY",
    "NODE_PREFIX",
    "PLAIN",
    "RFC6962",
    "FactLike",
    "MerkleFrontier",
    "MerkleTree",
    "ProvenanceLike",
    "canonical_json",
    "checkpoint_digest",
    "entry_message",
    "event_message",
    "fact_json",
    "fact_leaf",
    "fact_links",
    "facts_root",
    "fold_digest",
    "hasher",
    "key_fingerprint",
    "leaf_hash",
    "merkle_scheme",
    "node_hash",
    "parse_anchor",
    "root_of_leaves",
    "text_leaves",
    "verify_consistency",
    "verify_inclusion",
]
