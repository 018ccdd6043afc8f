"""Integrity proofs over facts: a Merkle root in promotion order (converge-core's)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from engine.facts import Fact, canonical_json, fact_json

EMPTY_ROOT = hashlib.sha256(b"").hexdigest()

__all__ = [
    "EMPTY_ROOT",
    "MerkleFrontier",
    "canonical_json",
    "fact_leaf",
    "facts_root",
    "root_of_leaves",
]


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


class MerkleFrontier:
    """The Merkle root of :func:`root_of_leaves`, kept incrementally in O(log n).

    Pairing left to right and carrying an odd node up builds a tree whose left
    subtrees are complete blocks of 2**k leaves (RFC 6962's shape). The frontier
    keeps the root of each complete block, largest first, like a binary counter;
    the root folds them from the right. So a run's root costs one hash per fact
    as it goes, and a checkpoint carries a few dozen hashes instead of every leaf.
    """

    __slots__ = ("count", "nodes")

    def __init__(self, count: int = 0, nodes: list[tuple[int, bytes]] | None = None) -> None:
        self.count = count
        self.nodes: list[tuple[int, bytes]] = nodes or []

    def extend(self, leaves: Iterable[bytes]) -> None:
        """Append leaves, in promotion order.

        Level by level: at size ``s`` the frontier's block of size ``s`` (if any)
        comes first, then the new blocks; pairs make the next level, and an odd
        last block joins the frontier. One hash per leaf, in list comprehensions.
        """
        sha = hashlib.sha256
        nodes = self.nodes
        level = list(leaves)
        added = len(level)
        size = 1
        carried: list[tuple[int, bytes]] = []
        while level:
            if nodes and nodes[-1][0] == size:
                level.insert(0, nodes.pop()[1])
            if len(level) % 2:
                carried.append((size, level.pop()))
            level = [sha(level[i] + level[i + 1]).digest() for i in range(0, len(level), 2)]
            size *= 2
        nodes.extend(reversed(carried))
        self.count += added

    def root(self) -> str:
        """The root (hex) of every leaf appended; equal to :func:`root_of_leaves`."""
        if not self.nodes:
            return EMPTY_ROOT
        sha = hashlib.sha256
        digest = self.nodes[-1][1]
        for _size, left in reversed(self.nodes[:-1]):
            digest = sha(left + digest).digest()
        return digest.hex()

    def to_json(self) -> list[object]:
        """``[count, [[size, hex], ...]]``, for a checkpoint."""
        return [self.count, [[size, digest.hex()] for size, digest in self.nodes]]

    @staticmethod
    def from_json(data: object) -> MerkleFrontier:
        """Rebuild :meth:`to_json` output; raises ``ValueError`` when malformed."""
        if not isinstance(data, list) or len(data) != 2:
            raise ValueError("a Merkle frontier is [count, nodes]")
        count, nodes = data
        if type(count) is not int or not isinstance(nodes, list):
            raise ValueError("a Merkle frontier is [count, nodes]")
        parsed = [(int(size), bytes.fromhex(digest)) for size, digest in nodes]
        if sum(size for size, _ in parsed) != count:
            raise ValueError("a Merkle frontier's sizes do not add up to its count")
        return MerkleFrontier(count, parsed)
