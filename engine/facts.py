"""Facts, their provenance, and proposals: the values a run is made of.

They are immutable named tuples, compared by value: a run builds hundreds of
thousands of them on its hot path, and a tuple is built four times faster than a
frozen dataclass (docs/performance.md). Use :func:`fact_to_dict` for JSON.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any, NamedTuple

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


def _text_ok(text: str) -> bool:
    # lone surrogates cannot be written as UTF-8 (the audit trail's encoding)
    if not text.isascii():
        text.encode("utf-8")
    return True


def content_key(content: Any) -> Any:
    """A hashable identity of JSON content: equal JSON values give equal keys.

    Strings and numbers are their own identity (``1 == 1.0``, as JSON numbers);
    booleans and ``null`` are tagged (JSON tells ``true`` from ``1``); a flat object
    of strings and numbers is its sorted items; anything else is canonical JSON
    text. Raises ``TypeError`` or ``ValueError`` for content that canonical UTF-8
    JSON cannot hold: non-JSON types, NaN or infinities, lone surrogates, integers
    of 4,000 digits or more, nesting deeper than Python's recursion limit.
    """
    cls = type(content)
    if cls is str:
        _text_ok(content)
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
            if type(k) is not str or not _text_ok(k):
                break
            vc = type(v)
            if vc is str:
                _text_ok(v)
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
    _text_ok(text)
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


canonical_json: Callable[[Any], str] = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), allow_nan=False, ensure_ascii=False
).encode
"""Deterministic JSON text: sorted keys, compact, UTF-8, no NaN (raises ``ValueError``)."""

_quote: Callable[[str], str] = json.encoder.encode_basestring


def fact_json(fact: Fact) -> str:
    """``canonical_json(fact_to_dict(fact))``, built straight from the tuple (2-3x faster).

    The one encoding of a fact: the audit trail's ``fact_promoted`` payload and
    the Merkle leaf of :func:`engine.integrity.facts_root` both use it. Raises
    ``ValueError``/``TypeError`` for content that is not JSON (NaN included).
    """
    content = fact.content
    ct = type(content)
    if ct is str:
        cs = _quote(content)
    elif ct is int:
        cs = str(content)
    else:
        cs = canonical_json(content)
    conf = fact.confidence
    confs = repr(conf) if type(conf) is float and math.isfinite(conf) else canonical_json(conf)
    prov = fact.provenance
    parents = prov.parents
    ps = "[" + ",".join([_quote(x) for x in parents]) + "]" if parents else "[]"
    cycle = prov.cycle
    cyc = str(cycle) if type(cycle) is int else canonical_json(cycle)
    return (
        f'{{"confidence":{confs},"content":{cs},"id":{_quote(fact.id)},'
        f'"key":{_quote(fact.key)},"provenance":{{"cycle":{cyc},'
        f'"parents":{ps},"proposal_id":{_quote(prov.proposal_id)},'
        f'"suggestor":{_quote(prov.suggestor)}}}}}'
    )
