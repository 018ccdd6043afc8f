"""Canonical JSON: the one text every hash of converge is taken over.

:func:`canonical_json` is any JSON value's text (sorted keys, compact separators,
UTF-8 kept, no NaN); :func:`fact_json` is a fact's, built straight from its tuple.
Pinned by ``tests/vectors/canonical-json.json`` and ``facts-root.json``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["FactLike", "ProvenanceLike", "canonical_json", "fact_json"]


class ProvenanceLike(Protocol):
    """What :func:`fact_json` reads of a fact's provenance (``engine.facts.Provenance``)."""

    @property
    def suggestor(self) -> str: ...
    @property
    def cycle(self) -> int: ...
    @property
    def proposal_id(self) -> str: ...
    @property
    def parents(self) -> tuple[str, ...]: ...


class FactLike(Protocol):
    """What :func:`fact_json` reads of a fact (``engine.facts.Fact``, which this core
    cannot import: the facts module imports it)."""

    @property
    def id(self) -> str: ...
    @property
    def key(self) -> str: ...
    @property
    def content(self) -> Any: ...
    @property
    def confidence(self) -> float: ...
    @property
    def provenance(self) -> ProvenanceLike: ...


canonical_json: Callable[[Any], str] = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), allow_nan=False, ensure_ascii=False
).encode
"""Deterministic JSON text: sorted keys, compact, UTF-8, no NaN (raises ``ValueError``)."""

_quote: Callable[[str], str] = json.encoder.encode_basestring


def fact_json(fact: FactLike) -> str:
    """``canonical_json(fact_to_dict(fact))``, built straight from the tuple (2-3x faster).

    The one encoding of a fact: the audit trail's ``fact_promoted`` payload and
    the Merkle leaf of :func:`engine.hashing.merkle.facts_root` both use it. Raises
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
