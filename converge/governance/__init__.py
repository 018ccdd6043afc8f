"""Governance: who may decide and see a gate, who the decider is, signed decisions,
and a gate's history.

- ``_rules``: whether a decision may be recorded (:func:`check_decision`: a known
  decider, the access policy of :mod:`converge.access` — approvers, escalation,
  four eyes — and required reasons);
- ``_deciders``: deciders and runners are people the store knows; on the command
  line, proven by their token (:func:`cli_decider`, :func:`cli_runner`);
- ``_signatures``: a decision signed here or elsewhere, checked against the
  decider's registered key before it is recorded (:func:`with_signature`,
  :func:`statement_for`);
- ``_history``: everything that happened to a gate (:func:`gate_history`).

The decision itself (load, check, record, resume) is :mod:`converge.decisions`;
the command line (:mod:`converge.cli.deciding`) and the inbox
(:mod:`converge.web.signed`) are adapters over both.
"""

from __future__ import annotations

from converge.governance._deciders import (
    cli_decider,
    cli_runner,
    token_person,
    tokens_required,
    unknown_person,
)
from converge.governance._history import CHAINED, gate_history
from converge.governance._rules import check_decision
from converge.governance._signatures import statement_for, with_signature

__all__ = [
    "CHAINED",
    "check_decision",
    "cli_decider",
    "cli_runner",
    "gate_history",
    "statement_for",
    "token_person",
    "tokens_required",
    "unknown_person",
    "with_signature",
]
