"""RFC 6962 Merkle trees: the tree head, inclusion and consistency proofs (docs/audit-format.md).

The hashing core keeps them (:mod:`engine.hashing.merkle`, :mod:`engine.hashing.proofs`);
this module keeps the names callers import from here.
"""

from __future__ import annotations

from engine.hashing.merkle import EMPTY, leaf_hash, node_hash
from engine.hashing.proofs import MerkleTree, verify_consistency, verify_inclusion

__all__ = [
    "EMPTY",
    "MerkleTree",
    "leaf_hash",
    "node_hash",
    "verify_consistency",
    "verify_inclusion",
]
