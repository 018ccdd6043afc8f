"""Integrity proofs over facts: a Merkle root in promotion order.

The hashing lives in :mod:`engine.hashing.merkle` (the RFC 6962 and LEGACY schemes,
the facts root, the incremental :class:`MerkleFrontier` a run keeps); this module
keeps the names the engine and its callers import from here.
"""

from __future__ import annotations

from engine.hashing.canonical import canonical_json
from engine.hashing.merkle import (
    EMPTY_ROOT,
    LEAF_PREFIX,
    LEGACY,
    NODE_PREFIX,
    RFC6962,
    MerkleFrontier,
    fact_leaf,
    facts_root,
    merkle_scheme,
    root_of_leaves,
)

__all__ = [
    "EMPTY_ROOT",
    "LEAF_PREFIX",
    "LEGACY",
    "NODE_PREFIX",
    "RFC6962",
    "MerkleFrontier",
    "canonical_json",
    "fact_leaf",
    "facts_root",
    "merkle_scheme",
    "root_of_leaves",
]
