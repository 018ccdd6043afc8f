"""Governance: who may decide and see a gate, who the decider is, signed decisions,
and a gate's history.

- ``_rules``: a gate's rules (approvers and groups, escalation, four eyes, required
  reasons): :class:`DecisionRules`, :func:`may_decide`, :func:`may_see`,
  :func:`check_decision`;
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
    tokens_required,
    unknown_person,
)
from converge.governance._history import CHAINED, gate_history
from converge.governance._rules import DecisionRules, check_decision, may_decide, may_see
from converge.governance._signatures import statement_for, with_signature

__all__ = [
    "CHAINED",
    "DecisionRules",
    "check_decision",
    "cli_decider",
    "cli_runner",
    "gate_history",
    "may_decide",
    "may_see",
    "statement_for",
    "tokens_required",
    "unknown_person",
    "with_signature",
]
