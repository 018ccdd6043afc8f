"""Salted commitments to facts: the chain format 2 (docs/audit-format.md, "Format 2").

In a run of chain format 2 each fact carries a random 32-byte ``salt`` (64 hex
digits) beside its content, and everything chained or hashed into a tree commits
to the fact through::

    C = SHA-256(salt ‖ canonical JSON of the fact)      (hex)

never through its content: the facts tree's leaf data is ``C`` (64 ASCII hex
digits), the chained text of a ``fact_promoted`` payload is ``{"commitment":C}``
and the chained ``run_started`` payload has each initial fact replaced by
``{"commitment":C}``. Erasing a fact's content (redaction) then leaves every hash
valid: its stored payload then carries ``"commitment": C`` (and no salt), its
content the redaction marker, and commits the same way. The salt keeps a short
value (a name, a yes/no) from being guessed by hashing candidates against ``C``.

A fact's stored payload in format 2 is its canonical JSON with ``"salt"`` as last
key (``salt`` sorts after every key of a fact), so :func:`salted_text` and
:func:`text_commitment` work on the text, without a JSON parse.
"""

from __future__ import annotations

import hashlib
import json
import os
from datetime import UTC, datetime
from typing import Any

from engine.hashing.canonical import canonical_json
from engine.hashing.checkpoint import checkpoint_digest

__all__ = [
    "COMMITTED_WRAP",
    "FORMAT_2",
    "SALT_TAIL",
    "chain_parts",
    "chained_payload",
    "checkpoint_sha256",
    "chunk_sha256",
    "commitment",
    "commitments_digest",
    "committed_payload",
    "committed_text",
    "fact_commitment",
    "new_salt",
    "new_salts",
    "redaction_note",
    "row_commitment",
    "salt_of_text",
    "salted_commitment",
    "salted_text",
    "text_commitment",
]

FORMAT_2 = "/2"
"""The suffix of a ``runs.chain`` of format 2 (``sha256/2``, ``hmac-sha256/2``)."""

SALT_TAIL = len(',"salt":"') + 64 + len('"}')
"""Characters the salt adds at the end of a fact's canonical JSON (75)."""

_SALT_OPEN = ',"salt":"'
_sha256 = hashlib.sha256


def chain_parts(chain: str) -> tuple[str, bool]:
    """A ``runs.chain`` split into its hash function (``sha256``, ``hmac-sha256``)
    and whether its format is 2 (``sha256/2``)."""
    if chain.endswith(FORMAT_2):
        return chain[: -len(FORMAT_2)], True
    return chain, False


def chained_payload(kind: str, payload: str) -> str:
    """:func:`committed_payload` for a verifier: a payload that is not of format 2
    where one must be gives a text no writer chains (so its hash fails)."""
    try:
        return committed_payload(kind, payload)
    except (ValueError, TypeError, KeyError, AttributeError):
        return "\u0000not a fact of format 2"


def new_salt() -> str:
    """A fresh random salt: 32 bytes from the OS, as 64 hex digits."""
    return os.urandom(32).hex()


def new_salts(n: int) -> tuple[bytes, str]:
    """``n`` fresh salts in one read from the OS: ``32 * n`` random bytes and their
    ``64 * n`` hex digits; salt ``i`` is ``raw[32*i : 32*i+32]``, as hex
    ``hexed[64*i : 64*i+64]`` (one system call for a batch, not one per fact: the
    bytes are as uniform as :func:`new_salt`'s)."""
    raw = os.urandom(32 * n)
    return raw, raw.hex()


def commitment(salt: str, fact_text: str) -> str:
    """``SHA-256(bytes.fromhex(salt) ‖ fact_text as UTF-8)`` as 64 hex digits.

    ``fact_text`` is the fact's canonical JSON *without* the salt. Raises
    ``ValueError`` when ``salt`` is not hex.
    """
    return salted_commitment(bytes.fromhex(salt), fact_text)


def salted_commitment(salt: bytes, fact_text: str) -> str:
    """:func:`commitment` of a salt given as its 32 bytes (the merge's hot loop,
    which has the bytes: no hex to parse)."""
    # measured (callgrind): as cheap as a copy of an empty sha256 updated with
    # salt + text, which copies the text once more
    h = _sha256(salt)
    h.update(fact_text.encode())
    return h.hexdigest()


def salted_text(fact_text: str, salt: str) -> str:
    """The stored payload of a fact: its canonical JSON with ``"salt"`` added last."""
    return f'{fact_text[:-1]}{_SALT_OPEN}{salt}"}}'


COMMITTED_WRAP = ('{"commitment":"', '"}')
"""What surrounds a commitment in :func:`committed_text` (before, after)."""


def committed_text(c: str) -> str:
    """The chained text of a fact's payload: ``{"commitment":"<c>"}``."""
    return f'{{"commitment":"{c}"}}'


def salt_of_text(text: str) -> str | None:
    """The salt at the tail of a salted fact's stored text (as :func:`salted_text`
    writes it), read without a JSON parse; None for any other text."""
    if text[-SALT_TAIL : -SALT_TAIL + len(_SALT_OPEN)] == _SALT_OPEN and text.endswith('"}'):
        return text[-66:-2]
    return None


def text_commitment(text: str) -> str:
    """The commitment of a stored fact payload text: a salted fact (its salt read
    from the tail) or a redacted one (its ``commitment``). Raises ``ValueError`` for
    a text that is neither."""
    salt = salt_of_text(text)
    if salt is not None:
        return commitment(salt, text[:-SALT_TAIL] + "}")
    return fact_commitment(json.loads(text))


def fact_commitment(data: Any) -> str:
    """The commitment of a stored fact as a JSON value: a fact dict with its
    ``salt``, or a redacted one (its ``commitment``). ``ValueError`` for anything
    else (a fact of format 1 has neither)."""
    if not isinstance(data, dict):
        raise ValueError("a fact of format 2 is a JSON object")
    c = data.get("commitment")
    if isinstance(c, str) and len(c) == 64:
        return c
    salt = data.get("salt")
    if not isinstance(salt, str) or len(salt) != 64:
        raise ValueError("a fact of format 2 has a 64-hex-digit salt or commitment")
    body = {k: v for k, v in data.items() if k != "salt"}
    return commitment(salt, canonical_json(body))


def committed_payload(kind: str, payload: str) -> str:
    """The text a format-2 event chains for its stored ``payload`` text: the fact
    replaced by ``{"commitment":C}`` in a ``fact_promoted``, each initial fact in a
    ``run_started``; every other payload as stored. ``ValueError`` on a fact
    payload that is not of format 2."""
    if kind == "fact_promoted":
        return committed_text(text_commitment(payload))
    if kind == "run_started":
        data = json.loads(payload)
        initial = data.get("initial_facts")
        if initial:
            data["initial_facts"] = [{"commitment": fact_commitment(f)} for f in initial]
            return canonical_json(data)
    return payload


def row_commitment(row: Any) -> str | None:
    """The commitment of a checkpoint row of format 2 (``fact_row`` and its seal
    last: its salt, or ``{"commitment": C}`` once redacted; a fork's fact dict with
    its ``salt``); None for a row of format 1. ``ValueError`` for a bad seal."""
    if isinstance(row, dict):
        return fact_commitment(row) if ("salt" in row or "commitment" in row) else None
    if not isinstance(row, list) or len(row) != 9:
        return None
    fid, key, content, confidence, suggestor, cycle, pid, parents, seal = row
    if isinstance(seal, dict):
        return fact_commitment(seal)
    body = {
        "confidence": confidence,
        "content": content,
        "id": fid,
        "key": key,
        "provenance": {
            "cycle": cycle,
            "parents": parents,
            "proposal_id": pid,
            "suggestor": suggestor,
        },
    }
    if not isinstance(seal, str) or len(seal) != 64:
        raise ValueError(f"fact row {fid!r}: a salt is 64 hex digits")
    return commitment(seal, canonical_json(body))


def commitments_digest(commits: list[str]) -> str:
    """The digest of facts of format 2 in a fact chunk or a checkpoint: sha256 of
    the JSON array of their commitments (``["C1","C2"]``)."""
    if not commits:
        return checkpoint_digest("[]")
    # one join, no string built per commitment: '["C1","C2"]'
    return checkpoint_digest('["' + '","'.join(commits) + '"]')


def chunk_sha256(rows: list[Any], data: str) -> str:
    """The digest of a fact chunk: of its rows' commitments when they are of
    format 2 (so that a redacted row keeps it), else of its text ``data``."""
    try:
        if rows and row_commitment(rows[0]) is not None:
            commits = [row_commitment(r) for r in rows]
            if all(c is not None for c in commits):
                return commitments_digest([c for c in commits if c is not None])
    except (ValueError, TypeError):
        pass  # not what was written: its digest differs
    return checkpoint_digest(data)


def checkpoint_sha256(blob: str) -> str:
    """The digest of a checkpoint's text as its chain records it: the sha256 of the
    text; for a run of format 2 carrying its facts inline, of the canonical JSON of
    the checkpoint with ``facts`` replaced by their commitments (so that redacting
    one of them keeps the digest). ``ValueError`` for a bad fact row."""
    if '"facts":[' not in blob or '"rfc6962-salted"' not in blob:
        return checkpoint_digest(blob)
    try:
        data = json.loads(blob)
        rows = data.get("facts") if isinstance(data, dict) else None
        if data.get("facts_merkle") != "rfc6962-salted" or not isinstance(rows, list):
            return checkpoint_digest(blob)
        commits = [row_commitment(r) for r in rows]
    except (ValueError, TypeError, AttributeError):
        return checkpoint_digest(blob)  # not what was written: its digest differs
    return checkpoint_digest(canonical_json({**data, "facts": commits}))


def redaction_note(value: Any) -> str | None:
    """``redacted by X at T: reason`` for a redacted fact's payload or content (a
    dict with ``redacted``: ``{"by", "at", "reason"}``), T in UTC ISO 8601; None for
    anything else."""
    mark = value.get("redacted") if isinstance(value, dict) else None
    if not isinstance(mark, dict):
        return None
    at = mark.get("at")
    when = (
        datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        if isinstance(at, int | float)
        else "?"
    )
    return f"redacted by {mark.get('by')} at {when}: {mark.get('reason')}"
