"""RFC 6962 Merkle trees kept whole: subtree hashes, inclusion and consistency proofs.

:class:`MerkleTree` keeps every complete level of a list of leaf hashes, so that a
subtree's hash, an audit path (RFC 9162 §2.1.3.1) or a consistency proof (§2.1.4.1)
costs O(log² n) after one pass over the leaves; the tree over ``n`` leaves splits at
the largest power of two smaller than ``n``. :func:`verify_inclusion` and
:func:`verify_consistency` are the RFC's checking algorithms (§2.1.3.2, §2.1.4.2).
The same shape with the LEGACY hashing of :mod:`engine.hashing.merkle` serves the
facts of runs recorded before proof bundles. Pinned by
``tests/vectors/rfc6962-roots.json`` and ``ledger-tree.json``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from engine.hashing.merkle import EMPTY, NODE_PREFIX, RFC6962, node_hash

__all__ = ["MerkleTree", "verify_consistency", "verify_inclusion"]


def _split(n: int) -> int:
    """The largest power of two smaller than ``n`` (n > 1)."""
    return 1 << ((n - 1).bit_length() - 1)


class MerkleTree:
    """The tree over ``leaves`` (leaf hashes, in order), its levels kept.

    ``levels[k][i]`` is the hash of the complete block of ``2**k`` leaves starting
    at ``i * 2**k``. Raises ``ValueError`` from the proof methods for sizes or
    indexes out of range.
    """

    def __init__(self, leaves: Sequence[bytes], scheme: str = RFC6962) -> None:
        self.scheme = scheme
        prefix = NODE_PREFIX[scheme]
        sha = hashlib.sha256
        level = list(leaves)
        self.levels: list[list[bytes]] = [level]
        while len(level) > 1:
            level = [
                sha(prefix + level[i] + level[i + 1]).digest() for i in range(0, len(level) - 1, 2)
            ]
            self.levels.append(level)

    @property
    def size(self) -> int:
        """The number of leaves."""
        return len(self.levels[0])

    def subtree(self, start: int, end: int) -> bytes:
        """The hash of the tree over leaves ``start..end-1`` (RFC 6962's MTH)."""
        n = end - start
        if n <= 0:
            return EMPTY
        if n & (n - 1) == 0 and start % n == 0:
            return self.levels[n.bit_length() - 1][start // n]
        k = _split(n)
        return node_hash(self.subtree(start, start + k), self.subtree(start + k, end), self.scheme)

    def root(self, size: int | None = None) -> bytes:
        """The root of the first ``size`` leaves (all of them by default)."""
        size = self.size if size is None else size
        if not 0 <= size <= self.size:
            raise ValueError(f"tree size {size} is not within 0..{self.size}")
        return self.subtree(0, size)

    def inclusion_proof(self, index: int, size: int | None = None) -> list[bytes]:
        """The audit path of leaf ``index`` in the tree of the first ``size`` leaves,
        leaf to root (RFC 9162 §2.1.3.1)."""
        size = self.size if size is None else size
        if not 0 <= index < size <= self.size:
            raise ValueError(f"leaf {index} is not in a tree of {size} leaves")
        path: list[bytes] = []
        start, end = 0, size
        while end - start > 1:
            k = _split(end - start)
            if index < start + k:
                path.append(self.subtree(start + k, end))
                end = start + k
            else:
                path.append(self.subtree(start, start + k))
                start += k
        path.reverse()
        return path

    def consistency_proof(self, size1: int, size2: int | None = None) -> list[bytes]:
        """The proof that the tree of ``size1`` leaves is a prefix of the tree of
        ``size2`` (RFC 9162 §2.1.4.1); empty when ``size1`` is 0 or equals ``size2``."""
        size2 = self.size if size2 is None else size2
        if not 0 <= size1 <= size2 <= self.size:
            raise ValueError(f"no consistency proof from size {size1} to size {size2}")
        if size1 == 0 or size1 == size2:
            return []
        proof: list[bytes] = []
        start, end, complete = 0, size2, True
        m = size1
        while True:
            n = end - start
            if m == n:
                if not complete:
                    proof.append(self.subtree(start, end))
                break
            k = _split(n)
            if m <= k:
                proof.append(self.subtree(start + k, end))
                end = start + k
            else:
                proof.append(self.subtree(start, start + k))
                start += k
                m -= k
                complete = False
        proof.reverse()
        return proof


def verify_inclusion(
    leaf: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes, scheme: str = RFC6962
) -> bool:
    """Whether ``proof`` is the audit path of ``leaf`` (a leaf hash) at ``index``
    in a tree of ``size`` leaves whose root is ``root`` (RFC 9162 §2.1.3.2); never for
    a leaf hash that is not 32 bytes."""
    if not 0 <= index < size or len(leaf) != len(EMPTY):
        return False
    fn, sn = index, size - 1
    r = leaf
    for p in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r, scheme)
            if not fn & 1:
                while fn & 1 == 0 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p, scheme)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root


def verify_consistency(
    size1: int, size2: int, proof: Sequence[bytes], root1: bytes, root2: bytes
) -> bool:
    """Whether ``proof`` shows the tree of ``size1`` leaves (root ``root1``) is a
    prefix of the tree of ``size2`` leaves (root ``root2``) (RFC 9162 §2.1.4.2).
    False from the empty tree (every tree extends it: no proof says anything), as
    transparency-dev's verifier and its vectors have it."""
    if not 0 < size1 <= size2:
        return False
    if size1 == size2:
        return not proof and root1 == root2
    if not proof:
        return False
    path = list(proof)
    if size1 & (size1 - 1) == 0:  # a power of two: the first tree is a node of the second
        path.insert(0, root1)
    fn, sn = size1 - 1, size2 - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if not fn & 1:
                while fn & 1 == 0 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    return fr == root1 and sr == root2 and sn == 0
