"""Integrity proofs over facts: a Merkle root in promotion order (converge-core's)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from engine.facts import Fact, canonical_json, fact_json

EMPTY_ROOT = hashlib.sha256(b"").hexdigest()

__all__ = ["EMPTY_ROOT", "canonical_json", "fact_leaf", "facts_root", "root_of_leaves"]


def fact_leaf(fact: Fact) -> bytes:
    """The sha256 leaf of one fact: its canonical JSON (``engine.facts.fact_json``), UTF-8."""
    return hashlib.sha256(fact_json(fact).encode()).digest()


def root_of_leaves(leaves: list[bytes]) -> str:
    """The Merkle root (hex) over precomputed leaves, in order.

    Pairs are hashed left to right; an odd node is carried up unchanged.
    """
    if not leaves:
        return EMPTY_ROOT
    sha = hashlib.sha256
    level = leaves
    while len(level) > 1:
        nxt = [sha(level[i] + level[i + 1]).digest() for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0].hex()


def facts_root(facts: Iterable[Fact]) -> str:
    """The sha256 Merkle root (hex) of the facts in promotion order.

    Two runs with the same facts in the same order have the same root.
    """
    return root_of_leaves([fact_leaf(f) for f in facts])
