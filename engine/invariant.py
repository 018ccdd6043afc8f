"""Invariants: rules over the whole context that must never break."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from engine.context import Context
from engine.stop import InvariantClass


@dataclass(frozen=True, slots=True)
class Violation:
    """Why an invariant does not hold (``reason``, one line)."""

    reason: str


@runtime_checkable
class Invariant(Protocol):
    """A predicate over the context, as in converge-core.

    ``invariant_class`` decides when it is checked: structural after every merge,
    semantic after every merge that added facts, acceptance before a successful end.
    ``check`` returns a :class:`Violation` or ``None``.
    """

    name: str
    invariant_class: InvariantClass

    def check(self, ctx: Context) -> Violation | None: ...
