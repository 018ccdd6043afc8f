"""The :class:`RunQueue` protocol: where a run goes to be executed elsewhere, later.

A decision sends its run's resume to one (``converge.decisions.decide(queue=...)``),
``converge submit`` a new run; ``converge.service.LocalRunPool`` (threads of this
process) and ``converge.workers.CeleryRunQueue`` (Celery workers) implement it.
"""

from __future__ import annotations

from typing import Literal, Protocol, runtime_checkable

Action = Literal["run", "resume"]
"""``run``: a submitted run (or its recovery); ``resume``: a run whose gate was decided."""


@runtime_checkable
class RunQueue(Protocol):
    """Something that gets a run executed elsewhere, later: ``send`` returns at once."""

    def send(self, run_id: str, action: Action = "run") -> None:
        """Hand over ``run_id`` with ``action`` (``run`` or ``resume``)."""
        ...
