"""The copies of a redacted fact's content outside the chain, scrubbed in the
redaction's transaction (:func:`audit.redaction.redact_fact`).

Some rows keep free text about a run that nothing hashes: the access log's
``detail`` (why a request about the run or one of its gates was refused) and a
gate notification's ``answer`` (what its webhook or mail server answered). Either
may quote a fact's content (an error message that repeats a value). They are
scrubbed: each form the content may be quoted in (:func:`quoted_forms`) is
replaced by ``[redacted]`` in the rows of the run (``access_log.target`` the run
or one of its gates; ``notification_deliveries.run_id`` the run).

A content shorter than :data:`MIN_CHARS` characters (``"yes"``, ``1``) is not
searched for: replacing it in every such text would garble unrelated words and
cannot tell a quote from a coincidence. Rows that mirror chained events (a gate
row's ``proposal``, ``gate_votes.reason``) are never changed: ``verify``
compares them with the chain (docs/audit.md, "Redaction", "Not erased").
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, select, update

from audit.core import StoreCore
from audit.tables import access_log, gates, notification_deliveries
from engine.facts import canonical_json

__all__ = ["MIN_CHARS", "SCRUBBED", "quoted_forms", "scrub_copies", "scrubbed"]

MIN_CHARS = 4
"""The shortest quoted form searched for (characters)."""

SCRUBBED = "[redacted]"
"""What a quoted content is replaced with."""


def quoted_forms(content: Any) -> list[str]:
    """The texts ``content`` may be quoted as, longest first: a string as is and
    JSON-escaped; anything else as its canonical JSON and each string inside it
    (of at least :data:`MIN_CHARS` characters). Empty for a content too short."""
    forms: set[str] = set()

    def add(text: str) -> None:
        if len(text) >= MIN_CHARS:
            forms.add(text)

    def strings(value: Any) -> None:
        if isinstance(value, str):
            add(value)
            add(json.encoder.encode_basestring(value)[1:-1])
        elif isinstance(value, dict):
            for v in value.values():
                strings(v)
        elif isinstance(value, list):
            for v in value:
                strings(v)

    if not isinstance(content, str):
        with contextlib.suppress(TypeError, ValueError):  # not JSON: its strings still are
            add(canonical_json(content))
    strings(content)
    return sorted(forms, key=lambda t: (-len(t), t))


def scrubbed(text: str, forms: Sequence[str]) -> str:
    """``text`` with each of ``forms`` replaced by :data:`SCRUBBED`."""
    for form in forms:
        if form in text:
            text = text.replace(form, SCRUBBED)
    return text


def scrub_copies(store: StoreCore, conn: Connection, run_id: str, forms: Sequence[str]) -> int:
    """Scrub ``forms`` from the run's access log details and notification answers
    (the feature tables that exist), in ``conn``'s transaction; how many rows
    changed. Raises what the database raises (the redaction then rolls back)."""
    if not forms:
        return 0
    changed = 0
    if store.has_table(access_log.name):
        gate_ids = conn.execute(select(gates.c.gate_id).where(gates.c.run_id == run_id))
        targets = [run_id, *gate_ids.scalars()]
        log = access_log.c
        for row_id, detail in conn.execute(
            select(log.id, log.detail).where(log.target.in_(targets), log.detail.is_not(None))
        ).all():
            new = scrubbed(detail, forms)
            if new != detail:
                conn.execute(update(access_log).where(log.id == row_id).values(detail=new))
                changed += 1
    if store.has_table(notification_deliveries.name):
        nd = notification_deliveries.c
        for gate_id, event, sink, answer in conn.execute(
            select(nd.gate_id, nd.event, nd.sink, nd.answer).where(
                nd.run_id == run_id, nd.answer.is_not(None)
            )
        ).all():
            new = scrubbed(answer, forms)
            if new != answer:
                conn.execute(
                    update(notification_deliveries)
                    .where(nd.gate_id == gate_id, nd.event == event, nd.sink == sink)
                    .values(answer=new)
                )
                changed += 1
    return changed
