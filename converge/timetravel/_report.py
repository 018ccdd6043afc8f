"""What a replay found: :class:`ReplayReport` (``converge replay``'s output)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from converge.timetravel._compare import Divergence

__all__ = ["ReplayReport"]


@dataclass(frozen=True)
class ReplayReport:
    """The replay of ``run_id``: ``live`` (real calls) or offline; the recorded
    (``expected_stop``) and replayed (``got_stop``) stops as
    :func:`~converge.timetravel._compare.comparable_stop` dicts; ``cycles`` and ``facts``
    (counts, recorded vs replayed); ``facts_root`` (recorded vs replayed);
    ``model_responses``: responses answered from the recording (0 in a live
    replay); ``played_back``: the non-deterministic suggestors whose recorded
    outputs stood in for their code; ``divergences``: the first difference of each
    cycle that differs, then the stop's (empty: the replay is the recorded run);
    ``models``: the models the agents named, recorded vs replayed; ``redacted``:
    the recorded run's redacted facts, ``ID: redacted by X at T: reason`` (their
    content is not compared; a redacted initial fact is replayed with its marker
    as content, which may change what follows)."""

    run_id: str
    live: bool
    job: str | None
    expected_stop: dict[str, Any] | None
    got_stop: dict[str, Any] | None
    cycles: tuple[int, int]
    facts: tuple[int, int]
    facts_root: tuple[str | None, str | None]
    model_responses: int = 0
    played_back: tuple[str, ...] = ()
    divergences: list[Divergence] = field(default_factory=list)
    models: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
    redacted: tuple[str, ...] = ()

    @property
    def other_models(self) -> bool:
        """True when the replay's agents called (or would call) other models than
        the recorded run's (``models``: recorded vs replayed, ``system:name``)."""
        return self.models[0] != self.models[1]

    @property
    def same(self) -> bool:
        """True when every cycle promoted the same facts and the stop is the same."""
        return not self.divergences

    @property
    def first_divergence(self) -> Divergence | None:
        """What changed first (cycle, suggestor, expected vs got), or None."""
        return self.divergences[0] if self.divergences else None

    def exit_code(self) -> int:
        """``converge replay``'s exit code: 0 the same (or any ``--live`` replay),
        1 a divergence."""
        return 0 if self.same or self.live else 1

    def to_dict(self) -> dict[str, Any]:
        """The JSON of ``converge replay --json``."""
        first = self.first_divergence
        return {
            "run_id": self.run_id,
            "live": self.live,
            "job": self.job,
            "same": self.same,
            "models": {"recorded": list(self.models[0]), "replayed": list(self.models[1])},
            "expected_stop": self.expected_stop,
            "got_stop": self.got_stop,
            "cycles": {"recorded": self.cycles[0], "replayed": self.cycles[1]},
            "facts": {"recorded": self.facts[0], "replayed": self.facts[1]},
            "facts_root": {"recorded": self.facts_root[0], "replayed": self.facts_root[1]},
            "model_responses": self.model_responses,
            "played_back": list(self.played_back),
            "redacted": list(self.redacted),
            "first_divergence": None if first is None else first.to_dict(),
            "divergences": [d.to_dict() for d in self.divergences],
        }
