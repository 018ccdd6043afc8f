"""Merkle trees over leaf hashes: the two schemes, roots, and the incremental frontier.

Two hashing schemes, named in a run's ``run_started`` event (``facts_merkle``):

- :data:`RFC6962` (the ledger's tree, and the facts of every run recorded since the
  proof bundles): RFC 6962 §2.1, ``leaf = sha256(0x00 ‖ data)``,
  ``node = sha256(0x01 ‖ left ‖ right)``, so that standard transparency-log
  verifiers and their audit paths apply;
- :data:`LEGACY` (facts of runs recorded before, whose ``run_started`` names no
  scheme): ``leaf = sha256(data)``, ``node = sha256(left ‖ right)``; they verify under it.

Both trees have RFC 6962's shape (the left subtree holds the largest power of two
of leaves smaller than the whole), and ``sha256(b"")`` is the root of no leaves. A
fact's leaf data is its canonical JSON (:func:`engine.hashing.canonical.fact_json`).
Pinned by ``tests/vectors/facts-root.json`` and ``rfc6962-roots.json``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field

from engine.hashing.canonical import FactLike, fact_json
from engine.hashing.commitment import text_commitment

__all__ = [
    "EMPTY",
    "EMPTY_ROOT",
    "LEAF_PREFIX",
    "LEAF_SEEDED",
    "LEGACY",
    "NODE_PREFIX",
    "NODE_SEEDED",
    "RFC6962",
    "SALTED",
    "MerkleFrontier",
    "commitment_leaf",
    "fact_leaf",
    "fact_text_leaves",
    "facts_root",
    "leaf_hash",
    "merkle_scheme",
    "node_hash",
    "root_of_leaves",
    "text_leaves",
]

EMPTY = hashlib.sha256(b"").digest()
"""The root of the tree of no leaves."""

EMPTY_ROOT = EMPTY.hex()
""":data:`EMPTY` in hex: the facts root of a run without facts."""

RFC6962 = "rfc6962"
"""RFC 6962 leaf/node prefixes: the ledger, and facts of runs since proof bundles."""

LEGACY = "sha256"
"""The facts root of runs recorded before: no domain-separation prefixes."""

SALTED = "rfc6962-salted"
"""The facts of a run of chain format 2: RFC 6962's tree whose leaf data is each
fact's salted commitment ``C`` (64 hex digits, :mod:`engine.hashing.commitment`),
not its canonical JSON."""

LEAF_PREFIX = {RFC6962: b"\x00", LEGACY: b"", SALTED: b"\x00"}
"""The bytes hashed before a leaf's data, per scheme."""

NODE_PREFIX = {RFC6962: b"\x01", LEGACY: b"", SALTED: b"\x01"}
"""The bytes hashed before two children, per scheme."""

LEAF_SEEDED = {scheme: hashlib.sha256(prefix).copy for scheme, prefix in LEAF_PREFIX.items()}
"""Per scheme, a new sha256 that has hashed the leaf prefix: the copy of a seeded
hash is cheaper than a new hash of the prefix joined to the data (a quarter less a
leaf under OpenSSL 3, on a write path of a leaf per fact)."""

NODE_SEEDED = {scheme: hashlib.sha256(prefix).copy for scheme, prefix in NODE_PREFIX.items()}
"""Per scheme, a new sha256 that has hashed the node prefix (as :data:`LEAF_SEEDED`)."""


def merkle_scheme(name: object) -> str:
    """The scheme a ``run_started`` payload's ``facts_merkle`` names (None: LEGACY).

    Raises ``ValueError`` for an unknown name.
    """
    if name is None:
        return LEGACY
    if name not in LEAF_PREFIX:
        raise ValueError(
            f"unknown facts Merkle scheme {name!r} (known: {RFC6962}, {LEGACY}, {SALTED})"
        )
    return str(name)


def leaf_hash(data: bytes, scheme: str = RFC6962) -> bytes:
    """``sha256(0x00 ‖ data)`` (RFC 6962), or ``sha256(data)`` under LEGACY."""
    return hashlib.sha256(LEAF_PREFIX[scheme] + data).digest()


def node_hash(left: bytes, right: bytes, scheme: str = RFC6962) -> bytes:
    """``sha256(0x01 ‖ left ‖ right)`` (RFC 6962), or without the prefix under LEGACY."""
    return hashlib.sha256(NODE_PREFIX[scheme] + left + right).digest()


def text_leaves(texts: Iterable[str], scheme: str = RFC6962) -> list[bytes]:
    """The leaf hashes of ``texts`` (UTF-8), in order: :func:`leaf_hash` of each, in
    one comprehension (a run's facts, an export's events: no call per leaf)."""
    sha, prefix = hashlib.sha256, LEAF_PREFIX[scheme]
    return [sha(prefix + t.encode()).digest() for t in texts]


def fact_text_leaves(texts: Iterable[str], scheme: str = RFC6962) -> list[bytes]:
    """The facts tree's leaf hashes of facts given as their stored texts (payloads,
    canonical JSON): under :data:`SALTED` of each text's commitment (its salt read
    from it, or a redacted fact's ``commitment``: ``ValueError`` for a text that has
    neither), else :func:`text_leaves`."""
    if scheme != SALTED:
        return text_leaves(texts, scheme)
    return [commitment_leaf(text_commitment(t)) for t in texts]


def fact_leaf(fact: FactLike, scheme: str = RFC6962) -> bytes:
    """The leaf hash of one fact: its canonical JSON (:func:`fact_json`), UTF-8.

    Raises ``ValueError`` under :data:`SALTED`, whose leaf is the fact's commitment
    (it needs the fact's salt: :func:`commitment_leaf`)."""
    if scheme == SALTED:
        raise ValueError("a salted facts tree's leaf is the fact's commitment, not its JSON")
    return hashlib.sha256(LEAF_PREFIX[scheme] + fact_json(fact).encode()).digest()


def commitment_leaf(c: str) -> bytes:
    """The :data:`SALTED` leaf hash of a fact whose commitment is ``c`` (hex):
    ``sha256(0x00 ‖ c as ASCII)``."""
    return hashlib.sha256(b"\x00" + c.encode()).digest()


def root_of_leaves(leaves: list[bytes], scheme: str = RFC6962) -> str:
    """The Merkle root (hex) over precomputed leaf hashes, in order.

    Pairs are hashed left to right; an odd node is carried up unchanged.
    """
    if not leaves:
        return EMPTY_ROOT
    sha = hashlib.sha256
    prefix = NODE_PREFIX[scheme]
    level = leaves
    while len(level) > 1:
        nxt = [sha(prefix + level[i] + level[i + 1]).digest() for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0].hex()


def facts_root(facts: Iterable[FactLike], scheme: str = RFC6962) -> str:
    """The Merkle root (hex) of the facts in promotion order (RFC 6962 by default).

    Two runs with the same facts in the same order have the same root.
    """
    return root_of_leaves([fact_leaf(f, scheme) for f in facts], scheme)


@dataclass(slots=True, eq=False)
class MerkleFrontier:
    """The Merkle root of :func:`root_of_leaves`, kept incrementally in O(log n).

    Pairing left to right and carrying an odd node up builds a tree whose left
    subtrees are complete blocks of 2**k leaves (RFC 6962's shape). The frontier
    keeps the root of each complete block, largest first, like a binary counter;
    the root folds them from the right. So a run's root costs one hash per fact
    as it goes, and a checkpoint carries a few dozen hashes instead of every leaf.
    ``count`` leaves in all, the blocks' ``nodes`` as ``(size, root)``; ``scheme`` is
    :data:`RFC6962` or :data:`LEGACY`.
    """

    count: int = 0
    nodes: list[tuple[int, bytes]] = field(default_factory=list)
    scheme: str = RFC6962

    def extend(self, leaves: Iterable[bytes]) -> None:
        """Append leaf hashes, in promotion order.

        Level by level: at size ``s`` the frontier's block of size ``s`` (if any)
        comes first, then the new blocks; pairs make the next level, and an odd
        last block joins the frontier. One hash per leaf.
        """
        seeded = NODE_SEEDED[self.scheme]
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
            pairs = iter(level)
            level = []
            up = level.append
            for left in pairs:
                h = seeded()
                h.update(left + next(pairs))
                up(h.digest())
            size *= 2
        nodes.extend(reversed(carried))
        self.count += added

    def root(self) -> str:
        """The root (hex) of every leaf appended; equal to :func:`root_of_leaves`."""
        if not self.nodes:
            return EMPTY_ROOT
        sha = hashlib.sha256
        prefix = NODE_PREFIX[self.scheme]
        digest = self.nodes[-1][1]
        for _size, left in reversed(self.nodes[:-1]):
            digest = sha(prefix + left + digest).digest()
        return digest.hex()

    def to_json(self) -> list[object]:
        """``[count, [[size, hex], ...]]`` (``[..., scheme]`` under RFC 6962), for a
        checkpoint."""
        nodes = [[size, digest.hex()] for size, digest in self.nodes]
        if self.scheme == LEGACY:
            return [self.count, nodes]
        return [self.count, nodes, self.scheme]

    @staticmethod
    def from_json(data: object) -> MerkleFrontier:
        """Rebuild :meth:`to_json` output (two items: :data:`LEGACY`); raises
        ``ValueError`` when malformed."""
        if not isinstance(data, list) or len(data) not in (2, 3):
            raise ValueError("a Merkle frontier is [count, nodes] or [count, nodes, scheme]")
        count, nodes = data[0], data[1]
        scheme = data[2] if len(data) == 3 else LEGACY
        if scheme not in LEAF_PREFIX:
            merkle_scheme(scheme)  # raises, naming it
        if type(count) is not int or not isinstance(nodes, list):
            raise ValueError("a Merkle frontier is [count, nodes]")
        parsed = [(int(size), bytes.fromhex(digest)) for size, digest in nodes]
        if sum(size for size, _ in parsed) != count:
            raise ValueError("a Merkle frontier's sizes do not add up to its count")
        return MerkleFrontier(count, parsed, scheme)
