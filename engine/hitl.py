"""Human-in-the-loop gates: proposals that wait for a person's decision."""

from __future__ import annotations

import time
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from engine.context import Context
from engine.facts import Proposal


class GateDecision(BaseModel):
    """A person's decision on a gate: ``approved``, ``by`` whom, and an optional ``reason``.

    ``value`` (JSON, None = keep the proposal as it is) is a human answer the
    approved proposal's content takes, e.g. a license classification; the
    application validates it with the policy's hook before the decision is made.

    ``signature`` (None = unsigned) is the decider's signed statement of this
    decision (a JSON object, see ``audit.decision_signatures``): the store records
    it in the chained event of the decision, and ``verify`` checks it.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    approved: bool
    by: str
    reason: str | None = None
    value: Any = None
    signature: dict[str, Any] | None = None

    @staticmethod
    def approve(*, by: str, reason: str | None = None, value: Any = None) -> GateDecision:
        """Approve: the proposal (its content replaced by ``value`` when given) is
        promoted and the run goes on."""
        return GateDecision(approved=True, by=by, reason=reason, value=value)

    @staticmethod
    def reject(*, by: str, reason: str | None = None) -> GateDecision:
        """Reject: the proposal is dropped and recorded, the run goes on."""
        return GateDecision(approved=False, by=by, reason=reason)


@runtime_checkable
class HitlPolicy(Protocol):
    """Decides which proposals need a person's approval (converge-core's HITL gates).

    ``match`` returns the gate's one-line summary when the proposal must wait, or
    ``None``. ``timeout_s`` (seconds, None = never) and ``on_timeout`` decide an
    expired gate.
    """

    name: str
    timeout_s: float | None
    on_timeout: Literal["approve", "reject"]

    def match(self, proposal: Proposal, suggestor: str, ctx: Context) -> str | None: ...


def iso_utc(ts: float | None) -> str | None:
    """A unix time (seconds) as ISO 8601 UTC to the second (``2026-11-26T10:00:00Z``),
    as gate errors and reports show when a gate was decided or expires; None → None."""
    return None if ts is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))
