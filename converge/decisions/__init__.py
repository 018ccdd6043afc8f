"""Deciding gates from the application: one decision noun for every decider.

A decision (:func:`decide`) loads the gate and its run's header, checks who may
decide (approvers, four eyes, reasons, a known person: :mod:`converge.governance`;
the quorum and the value hook of the job the run recorded; the signature),
records it in one store transaction (the vote, the decision with its value and
signed statement, the gate's decided state: :func:`audit.people.record_decision`)
and resumes the run here or sends its resume to a queue. ``converge approve`` /
``reject`` and the inbox's routes are adapters over it.

- a gate whose policy needs one approval is decided once: of racing deciders
  exactly one wins the compare-and-set;
- a gate with ``approvals_required=N`` counts votes: a vote that does not decide
  is a ``gate_vote`` event in the run's chain; the N-th distinct approval or the
  first rejection decides it;
- a pending gate past its deadline is decided ``expired`` with its ``on_timeout``
  decision and its run resumed (:func:`apply_expiry`, :func:`expire_due`).

Modules: ``_decision`` (the flow), ``_checks`` (whether it may be recorded),
``_policy`` (what the recorded job says about a gate), ``_expiry`` (deadlines),
``_resume`` (resume here or queue).
"""

from __future__ import annotations

from converge.decisions._checks import Checked, check
from converge.decisions._decision import DecisionReport, decide, gate_votes
from converge.decisions._expiry import Clock, apply_expiry, expire_due, is_expired
from converge.decisions._policy import (
    approvals_required,
    checked_value,
    job_of_run,
    policy_spec,
    recorded_job,
)
from converge.decisions._resume import Execute, executor_for, hand_over

__all__ = [
    "Checked",
    "Clock",
    "DecisionReport",
    "Execute",
    "apply_expiry",
    "approvals_required",
    "check",
    "checked_value",
    "decide",
    "executor_for",
    "expire_due",
    "gate_votes",
    "hand_over",
    "is_expired",
    "job_of_run",
    "policy_spec",
    "recorded_job",
]
