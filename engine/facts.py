"""Facts, their provenance, and proposals: the values a run is made of.

They are immutable named tuples, compared by value: a run builds hundreds of
thousands of them on its hot path, and a tuple is built four times faster than a
frozen dataclass (docs/performance.md). Use :func:`fact_to_dict` for JSON; a fact's
canonical text, :func:`fact_json`, and :func:`canonical_json` are the hashing core's
(:mod:`engine.hashing.canonical`), importable from here too.
"""

from __future__ import annotations

import json
import math
from typing import Any, NamedTuple

from engine.hashing.canonical import canonical_json as canonical_json
from engine.hashing.canonical import fact_json as fact_json

INPUT_SOURCE = "input"
"""The ``Provenance.suggestor`` of facts given as the run's initial input."""


class Provenance(NamedTuple):
    """Where a fact came from.

    ``suggestor``: the proposing suggestor's name, or ``"input"``;
    ``cycle``: the cycle it was promoted in (0 for input);
    ``proposal_id``: the proposal it was promoted from;
    ``parents``: ids of the facts it was derived from, as declared by the suggestor.
    """

    suggestor: str
    cycle: int
    proposal_id: str
    parents: tuple[str, ...] = ()


class Fact(NamedTuple):
    """An immutable, promoted piece of the context.

    ``id`` is deterministic (``"<key>#<n>"``: the n-th fact promoted on that key),
    ``content`` is JSON-serialisable, ``confidence`` is in 0..1.
    """

    id: str
    key: str
    content: Any
    confidence: float
    provenance: Provenance


class Proposal(NamedTuple):
    """What a suggestor returns: a candidate fact the engine may promote.

    A proposal equal in (key, content) to an existing fact is a duplicate and
    changes nothing. ``confidence`` is in 0..1; ``parents`` names the fact ids it
    derives from (lineage); ``id`` defaults to ``"<suggestor>/<cycle>/<effect>.<index>"``.
    """

    key: str
    content: Any
    confidence: float = 1.0
    parents: tuple[str, ...] = ()
    id: str | None = None


_dumps = json.dumps


MAX_INT = 10**4000
"""Integers of 4,000 digits or more are refused: CPython will not print past 4,300."""


def content_key(content: Any) -> Any:
    """A hashable identity of JSON content: equal JSON values give equal keys.

    Strings and numbers are their own identity (``1 == 1.0``, as JSON numbers);
    booleans and ``null`` are tagged (JSON tells ``true`` from ``1``); a flat object
    of strings and numbers is its sorted items; anything else is canonical JSON
    text. Raises ``TypeError`` or ``ValueError`` for content that canonical UTF-8
    JSON cannot hold: non-JSON types, NaN or infinities, lone surrogates, integers
    of 4,000 digits or more, nesting deeper than Python's recursion limit.
    """
    # a lone surrogate cannot be written as UTF-8 (the audit trail's encoding):
    # str.encode raises for it; ASCII text, the usual case, needs no check
    cls = type(content)
    if cls is str:
        if not content.isascii():
            content.encode("utf-8")
        return content
    if cls is int:
        if not -MAX_INT < content < MAX_INT:
            raise ValueError("integer too large for JSON (4,000 digits or more)")
        return content
    if cls is float:
        if not math.isfinite(content):
            raise ValueError(f"content must be finite JSON, got {content!r}")
        return content
    if cls is dict:
        for k, v in content.items():
            if type(k) is not str:
                break
            if not k.isascii():
                k.encode("utf-8")
            vc = type(v)
            if vc is str:
                if not v.isascii():
                    v.encode("utf-8")
            elif vc is int:
                if not -MAX_INT < v < MAX_INT:
                    break  # the JSON path names the problem
            elif vc is float:
                if not math.isfinite(v):
                    break
            else:
                break
        else:
            return ("d", tuple(sorted(content.items())))
    elif cls is bool or content is None:
        return ("b", content)
    try:
        text = _dumps(
            content, sort_keys=True, separators=(",", ":"), allow_nan=False, ensure_ascii=False
        )
    except RecursionError:
        raise ValueError("content is nested too deeply for JSON") from None
    if not text.isascii():
        text.encode("utf-8")
    return ("j", text)


def fact_to_dict(fact: Fact) -> dict[str, Any]:
    """The JSON-ready dict of a fact, provenance included."""
    return {
        "id": fact.id,
        "key": fact.key,
        "content": fact.content,
        "confidence": fact.confidence,
        "provenance": {
            "suggestor": fact.provenance.suggestor,
            "cycle": fact.provenance.cycle,
            "proposal_id": fact.provenance.proposal_id,
            "parents": list(fact.provenance.parents),
        },
    }


def fact_from_dict(data: dict[str, Any]) -> Fact:
    """Rebuild a fact from :func:`fact_to_dict` output."""
    p = data["provenance"]
    return Fact(
        id=data["id"],
        key=data["key"],
        content=data["content"],
        confidence=float(data["confidence"]),
        provenance=Provenance(
            suggestor=p["suggestor"],
            cycle=int(p["cycle"]),
            proposal_id=p["proposal_id"],
            parents=tuple(p.get("parents", ())),
        ),
    )


def proposal_to_dict(p: Proposal) -> dict[str, Any]:
    """A proposal as JSON: ``{key, content, confidence, parents, id}`` (what the
    ``effect`` of a non-deterministic suggestor's ``suggestor_executed`` records)."""
    return {
        "key": p.key,
        "content": p.content,
        "confidence": p.confidence,
        "parents": list(p.parents),
        "id": p.id,
    }


def proposal_from_dict(data: dict[str, Any]) -> Proposal:
    """The inverse of :func:`proposal_to_dict`. Raises ``KeyError`` / ``TypeError``
    for data of another shape."""
    return Proposal(
        data["key"],
        data["content"],
        float(data.get("confidence", 1.0)),
        tuple(data.get("parents", ())),
        data.get("id"),
    )


# -- checkpoint rows: the compact form of facts in checkpoints and fact chunks --
def fact_row(f: Fact) -> list[Any]:
    """A fact as a checkpoint row: ``[id, key, content, confidence, suggestor, cycle,
    proposal_id, parents]``."""
    p = f.provenance
    return [f.id, f.key, f.content, f.confidence, p[0], p[1], p[2], list(p[3])]
