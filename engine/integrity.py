"""Integrity proofs over facts: a Merkle root in promotion order (converge-core's)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable

from engine.facts import Fact, fact_to_dict

EMPTY_ROOT = hashlib.sha256(b"").hexdigest()


_encode = json.JSONEncoder(sort_keys=True, separators=(",", ":"), allow_nan=False).encode


def canonical_json(value: object) -> str:
    """Deterministic JSON text: sorted keys, no spaces, no NaN."""
    # one encoder for every call: json.dumps builds a new one per call with these options
    return _encode(value)


def fact_leaf(fact: Fact) -> bytes:
    """The sha256 leaf of one fact (its canonical JSON, provenance included)."""
    return hashlib.sha256(canonical_json(fact_to_dict(fact)).encode()).digest()


def facts_root(facts: Iterable[Fact]) -> str:
    """The sha256 Merkle root (hex) of the facts in promotion order.

    Pairs are hashed left to right; an odd node is carried up unchanged. Two runs
    with the same facts in the same order have the same root.
    """
    level = [fact_leaf(f) for f in facts]
    if not level:
        return EMPTY_ROOT
    while len(level) > 1:
        nxt = [
            hashlib.sha256(level[i] + level[i + 1]).digest() for i in range(0, len(level) - 1, 2)
        ]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0].hex()
