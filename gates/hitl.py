"""Human-in-the-loop policies: which proposals wait for a person's approval.

A matching proposal opens a gate during the merge; the run pauses with
``HitlGatePending`` (as converge-core's HITL gates, which match keys and a
confidence threshold) until ``Engine.resume(gate_id, decision)``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

from engine.context import Context
from engine.facts import Proposal
from engine.hitl import GateDecision, HitlPolicy

DEFAULT_SUMMARY = "Approve {key} from {suggestor}: {content}"

ReasonRequired = Literal["reject", "approve", "both", "never"]
"""Which decisions of a gate must give a reason."""
REASON_REQUIRED: tuple[ReasonRequired, ...] = ("reject", "approve", "both", "never")


class ApprovalPolicy:
    """Opens a gate for proposals that match every given condition.

    ``keys`` / ``suggestors`` restrict by key or proposer (None = any);
    ``confidence_at_most`` matches proposals at or under that confidence;
    ``when(proposal, ctx) -> bool`` adds any condition. ``summary`` is a
    ``str.format`` template over ``key``, ``content``, ``suggestor``,
    ``confidence`` and ``proposal`` (e.g. ``"Classify {content[name]}"``).
    ``timeout_s`` (seconds, None = never) and ``on_timeout`` decide expired gates.
    ``approvals_required`` (default 1) is the quorum: the gate is approved once that
    many distinct people approved it, rejected by the first rejection (counted by
    the application, e.g. ``converge.decisions``; the engine sees one decision).
    ``validate_value(value, content) -> content`` checks a human answer given with
    an approval (``converge approve --value``) and returns the content the
    proposal takes, raising ``ValueError`` when the answer is invalid (e.g. not an
    SPDX expression); without it the content becomes the value as given.

    Who may decide (enforced by the application, e.g. ``converge.decisions``, from
    :attr:`decision_rules`, which the engine records with each gate it opens):
    ``approvers`` (people or groups; None = any approver), ``four_eyes`` (the
    deciders differ from whoever submitted or resumed the run), ``reason_required``
    (``"reject"``, ``"approve"``, ``"both"`` or ``"never"``), ``escalate_after_s``
    (seconds after opening, the approvers widen to ``escalate_to``), ``notify``
    (sinks told when the gate opens, is decided, expires or escalates: dicts
    ``{"webhook": URL, "secret_env": VAR}`` or ``{"email": ADDRESS}``).
    Raises ``ValueError`` for a bad ``on_timeout``, ``timeout_s``, quorum,
    ``reason_required`` or escalation.
    """

    def __init__(
        self,
        *,
        keys: Iterable[str] | None = None,
        suggestors: Iterable[str] | None = None,
        confidence_at_most: float | None = None,
        when: Callable[[Proposal, Context], bool] | None = None,
        summary: str = DEFAULT_SUMMARY,
        timeout_s: float | None = None,
        on_timeout: Literal["approve", "reject"] = "reject",
        name: str | None = None,
        approvals_required: int = 1,
        validate_value: Callable[[Any, Any], Any] | None = None,
        approvers: Iterable[str] | None = None,
        four_eyes: bool = False,
        reason_required: ReasonRequired = "reject",
        escalate_after_s: float | None = None,
        escalate_to: Iterable[str] | None = None,
        notify: Iterable[Mapping[str, str]] = (),
    ) -> None:
        if reason_required not in REASON_REQUIRED:
            raise ValueError(
                f"reason_required must be one of {', '.join(REASON_REQUIRED)}, "
                f"got {reason_required!r}"
            )
        if escalate_after_s is not None and (escalate_after_s <= 0 or not escalate_to):
            raise ValueError("escalate_after_s needs a positive number of seconds and escalate_to")
        if not isinstance(approvals_required, int) or approvals_required < 1:
            raise ValueError(f"approvals_required must be an int >= 1, got {approvals_required!r}")
        if on_timeout not in ("approve", "reject"):
            raise ValueError(f"on_timeout must be 'approve' or 'reject', got {on_timeout!r}")
        if timeout_s is not None and timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0 seconds, got {timeout_s}")
        self.keys = None if keys is None else frozenset(keys)
        self.suggestors = None if suggestors is None else frozenset(suggestors)
        self.confidence_at_most = confidence_at_most
        self.when = when
        self.summary = summary
        self.timeout_s = timeout_s
        self.on_timeout: Literal["approve", "reject"] = on_timeout
        self.approvals_required = approvals_required
        self.validate_value = validate_value
        self.decision_rules: dict[str, Any] = {
            "approvers": sorted(set(approvers)) if approvers is not None else None,
            "four_eyes": bool(four_eyes),
            "reason_required": reason_required,
            "escalate_after_s": escalate_after_s,
            "escalate_to": sorted(set(escalate_to or ())),
            "notify": [dict(sink) for sink in notify],
        }
        """Who may decide this policy's gates, as JSON (recorded with each gate)."""
        self.name = name or "require_approval:" + ",".join(sorted(self.keys or ["*"]))

    def match(self, proposal: Proposal, suggestor: str, ctx: Context) -> str | None:
        """The gate's summary when ``proposal`` must wait for a person, else None."""
        if self.keys is not None and proposal.key not in self.keys:
            return None
        if self.suggestors is not None and suggestor not in self.suggestors:
            return None
        if self.confidence_at_most is not None and proposal.confidence > self.confidence_at_most:
            return None
        if self.when is not None and not self.when(proposal, ctx):
            return None
        return self.render(proposal, suggestor)

    def render(self, proposal: Proposal, suggestor: str) -> str:
        """The summary for one proposal; a template that does not fit falls back safely."""
        values: dict[str, Any] = {
            "key": proposal.key,
            "content": proposal.content,
            "suggestor": suggestor,
            "confidence": proposal.confidence,
            "proposal": proposal,
        }
        try:
            return self.summary.format(**values)
        except (KeyError, IndexError, AttributeError, TypeError, ValueError):
            return DEFAULT_SUMMARY.format(**values)


def require_approval(
    *,
    keys: Iterable[str] | None = None,
    suggestors: Iterable[str] | None = None,
    confidence_at_most: float | None = None,
    when: Callable[[Proposal, Context], bool] | None = None,
    summary: str = DEFAULT_SUMMARY,
    timeout_s: float | None = None,
    on_timeout: Literal["approve", "reject"] = "reject",
    name: str | None = None,
    approvals_required: int = 1,
    validate_value: Callable[[Any, Any], Any] | None = None,
    approvers: Iterable[str] | None = None,
    four_eyes: bool = False,
    reason_required: ReasonRequired = "reject",
    escalate_after_s: float | None = None,
    escalate_to: Iterable[str] | None = None,
    notify: Iterable[Mapping[str, str]] = (),
) -> ApprovalPolicy:
    """A HITL policy: proposals matching all given conditions wait for approval
    (by ``approvals_required`` distinct people among ``approvers``; see
    :class:`ApprovalPolicy`)."""
    return ApprovalPolicy(
        keys=keys,
        suggestors=suggestors,
        confidence_at_most=confidence_at_most,
        when=when,
        summary=summary,
        timeout_s=timeout_s,
        on_timeout=on_timeout,
        name=name,
        approvals_required=approvals_required,
        validate_value=validate_value,
        approvers=approvers,
        four_eyes=four_eyes,
        reason_required=reason_required,
        escalate_after_s=escalate_after_s,
        escalate_to=escalate_to,
        notify=notify,
    )


__all__ = ["ApprovalPolicy", "GateDecision", "HitlPolicy", "require_approval"]
