"""The digests of a run's checkpoint and of the fact chunks it refers to.

A checkpoint's text is hashed with sha256 (:func:`checkpoint_digest`) and the digest
chained in the ``checkpoint_saved`` / ``run_stopped`` / ``run_paused`` event written
with it. A ``fact_chunks`` row's ``digest`` is the same sha256 of its ``data``; a
checkpoint that refers to the chunks carries the chain of their digests, from 64
zeros, one :func:`fold_digest` per chunk. Pinned by
``tests/vectors/checkpoint-digest.json`` (and ``canonical-json.json``).
"""

from __future__ import annotations

import hashlib

__all__ = ["checkpoint_digest", "fold_digest"]


def checkpoint_digest(blob: str) -> str:
    """The sha256 (hex) of a stored checkpoint's text (or a fact chunk's ``data``), UTF-8."""
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def fold_digest(digest: str, chunk_digest: str) -> str:
    """The chain of fact-chunk digests a checkpoint refers to, one chunk further."""
    return hashlib.sha256(f"{digest}{chunk_digest}".encode()).hexdigest()
