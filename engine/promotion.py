"""Promotion gates: validators a proposal must pass before it becomes a fact."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from engine.context import Context
from engine.facts import Proposal

OnReject = Literal["stop", "drop"]


@dataclass(frozen=True, slots=True)
class Rejection:
    """A gate's refusal to promote a proposal; ``reason`` is one line."""

    reason: str


@runtime_checkable
class PromotionGate(Protocol):
    """Validates proposals during the merge.

    ``check`` returns ``None`` to let the proposal through or a :class:`Rejection`.
    ``on_reject="stop"`` ends the run with ``PromotionRejected``; ``"drop"`` drops
    the proposal, records a ``proposal_rejected`` audit event and goes on.
    """

    name: str
    on_reject: OnReject

    def check(self, proposal: Proposal, suggestor: str, ctx: Context) -> Rejection | None: ...
