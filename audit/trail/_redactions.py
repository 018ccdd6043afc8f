"""Redacted facts against their chained ``fact_redacted`` events (chain format 2).

A redacted fact's stored payload commits like its salted one (its ``commitment``
is what the chain hashes), so the chain alone cannot tell a redaction done by
:func:`audit.redact_fact` from content erased by hand, nor a marker rewritten
afterwards. :func:`check_redactions` ties them: every fact stored redacted (a
``fact_promoted`` payload, or an entry of ``run_started``'s ``initial_facts``,
carrying ``commitment`` and the marker ``{"redacted": {...}}``) must have a
chained ``fact_redacted`` event naming it, with its commitment, and a marker
equal to that event's ``at``, ``by`` and ``reason``; every ``fact_redacted``
event must name a fact stored redacted (not a content put back). Rows of chain
format 1 hold no redaction: for them the check only asks that no
``fact_redacted`` event be chained.

The store's verify and the proof-bundle verifier (:mod:`audit.proofs`) both run
it, so that both word a disagreement alike; it lives beside the chain, which
both import.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from audit.trail._chain import ChainRow

__all__ = ["MARK", "REDACTED", "check_redactions"]

Problem = tuple[int, str] | None
"""(seq, reason) of the first disagreement, or None."""

REDACTED = "fact_redacted"
MARK = '"redacted":{'
"""In the canonical text of every redacted fact (verify parses no other fact)."""


def check_redactions(rows: Sequence[ChainRow], salted: bool = True) -> Problem:
    """``(seq, why)`` of the first redaction that disagrees with the chain, or None.

    ``salted``: the run is of chain format 2 (else only its ``fact_redacted``
    events are looked for: its facts cannot be redacted, and scanning their texts
    costs about 0.6 µs a fact). Never raises: a payload that is not JSON was
    reported by the chain's checks.
    """
    needle = MARK
    # one scan of the texts: only the rows that may take part are parsed
    if salted:
        rows = [r for r in rows if r.kind == REDACTED or needle in r.payload]
    else:
        rows = [r for r in rows if r.kind == REDACTED]
    if not rows:
        return None
    events: dict[str, tuple[int, dict[str, Any]]] = {}
    for row in rows:
        if row.kind != REDACTED:
            continue
        p = _load(row.payload)
        fid = p.get("fact_id") if p is not None else None
        if not isinstance(fid, str):
            return row.seq, "fact_redacted names no fact"
        if fid in events:
            return row.seq, f"fact {fid} is redacted twice"
        events[fid] = (row.seq, p or {})
    seen: set[str] = set()
    for seq, fact in _stored_facts(rows):
        fid = fact.get("id")
        mark = fact.get("content")
        if not isinstance(fid, str) or not isinstance(mark, dict):
            continue
        if "redacted" not in mark or "commitment" not in fact:
            continue
        seen.add(fid)
        found = events.get(fid)
        if found is None:
            return seq, f"fact {fid} is redacted without a fact_redacted event"
        at, event = found
        if fact.get("commitment") != event.get("commitment"):
            return seq, f"fact {fid}'s commitment differs from its fact_redacted (seq {at})"
        want = {k: event.get(k) for k in ("at", "by", "reason")}
        if mark.get("redacted") != want:
            return seq, f"fact {fid}'s redaction marker differs from its fact_redacted (seq {at})"
    for fid, (at, _) in events.items():
        if fid not in seen:
            return at, f"fact_redacted names fact {fid}, which the run does not hold redacted"
    return None


def _stored_facts(rows: Sequence[ChainRow]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(seq, fact dict) of the run's initial facts and promoted facts that may be
    redacted (their text holds a marker: the others are not parsed)."""
    for row in rows:
        if MARK not in row.payload:
            continue
        if row.kind == "fact_promoted":
            p = _load(row.payload)
            if p is not None:
                yield row.seq, p
        elif row.kind == "run_started":
            p = _load(row.payload)
            for fact in (p or {}).get("initial_facts") or ():
                if isinstance(fact, dict):
                    yield row.seq, fact


def _load(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
