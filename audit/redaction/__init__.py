"""Redaction: a fact's content erased from a run, its commitment kept
(``_redact``; docs/audit.md, "Redaction").
"""

from __future__ import annotations

from audit.redaction._redact import REDACTED, Redaction, redact_fact, redaction_note

__all__ = [
    "REDACTED",
    "Redaction",
    "redact_fact",
    "redaction_note",
]
