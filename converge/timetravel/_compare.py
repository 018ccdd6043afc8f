"""Where a replay parts from the run it replays: :class:`Divergence` and :func:`compare`.

Cycle by cycle, in order: the executions (which suggestors ran, and how each
ended: executed, failed with which error, stop requested), then the facts
promoted (id, key, content and the suggestor that proposed them, in promotion
order); after the last cycle, the stop. Each cycle that differs gives one
divergence, its first difference; the first of all is what changed first.

A fact the recorded run holds redacted (its content erased: docs/audit.md,
"Redaction") is compared by id, key and suggestor only; its content, on both
sides, is the redaction's note (``redacted by X at T: reason``), so that a replay
that computes the erased content again neither fails on it nor shows it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from converge.timetravel._recording import CycleRecord, Recording
from engine.hashing.commitment import redaction_note
from engine.result import counted

__all__ = ["Divergence", "DivergenceKind", "comparable_stop", "compare", "redacted_facts"]

DivergenceKind = Literal["execution", "fact", "request", "unrecorded", "stop"]
"""What differs: which suggestors ran or how they ended (``execution``), a promoted
fact (``fact``), what an agent asked its model (``request``: the prompt, or a
tool's result, differs from the recorded request), an output the recording lacks
(``unrecorded``), or the stop (``stop``)."""


@dataclass(frozen=True)
class Divergence:
    """One difference between the recorded run and its replay: in ``cycle`` (for a
    stop: the cycle the replay stopped at), by ``suggestor`` (None for a stop),
    ``expected`` (recorded) vs ``got`` (replayed), both JSON; ``message`` says it
    in one line."""

    kind: DivergenceKind
    cycle: int
    suggestor: str | None
    expected: Any
    got: Any
    message: str

    def to_dict(self) -> dict[str, Any]:
        """The JSON of ``converge replay --json``'s divergences."""
        return {
            "kind": self.kind,
            "cycle": self.cycle,
            "suggestor": self.suggestor,
            "expected": self.expected,
            "got": self.got,
            "message": self.message,
        }


def compare(
    recorded: Recording, replayed: Recording, misses: Sequence[Divergence] = ()
) -> list[Divergence]:
    """The first difference of each cycle that differs, in cycle order, then the
    stop's (see the module docstring). ``misses`` are what the replay's model tape
    found (a request other than recorded, a response not recorded): the first of a
    cycle comes before what the cycle's events show, being their cause."""
    out: list[Divergence] = []
    redacted = redacted_facts(recorded)
    last = max(recorded.last_cycle, replayed.last_cycle, *(m.cycle for m in misses))
    for n in range(1, last + 1):
        a = recorded.cycles.get(n) or CycleRecord(n)
        b = replayed.cycles.get(n) or CycleRecord(n)
        found = next((m for m in misses if m.cycle == n), None)
        found = found or _executions(a, b) or _facts(a, b, redacted)
        if found is not None:
            out.append(found)
    stop = _stop(recorded, replayed)
    if stop is not None:
        out.append(stop)
    return out


def _executions(a: CycleRecord, b: CycleRecord) -> Divergence | None:
    got = {e.suggestor: e for e in b.executions}
    for e in a.executions:
        other = got.pop(e.suggestor, None)
        if other is None:
            return Divergence(
                "execution",
                a.cycle,
                e.suggestor,
                e.summary(),
                None,
                f"cycle {a.cycle}: {e.suggestor} ran in the recorded run, not in the replay",
            )
        if other.summary() != e.summary():
            return Divergence(
                "execution",
                a.cycle,
                e.suggestor,
                e.summary(),
                other.summary(),
                f"cycle {a.cycle}: {e.suggestor} {_ended(e.summary())} in the recorded run, "
                f"{_ended(other.summary())} in the replay",
            )
    for e in b.executions:
        if e.suggestor in got:
            return Divergence(
                "execution",
                a.cycle,
                e.suggestor,
                None,
                e.summary(),
                f"cycle {a.cycle}: {e.suggestor} ran in the replay, not in the recorded run",
            )
    return None


def _ended(summary: dict[str, Any]) -> str:
    if summary["outcome"] == "failed":
        return f"failed ({summary.get('error')})"
    return "requested a stop" if summary["outcome"] == "stop_requested" else "ran"


def redacted_facts(recorded: Recording) -> dict[str, str]:
    """The recorded run's redacted facts (initial or promoted): fact id → ``redacted
    by X at T: reason`` (docs/audit.md, "Redaction")."""
    out: dict[str, str] = {}
    facts = [*recorded.started.get("initial_facts", ()), *recorded.facts()]
    for f in facts:
        note = redaction_note(f.get("content")) if isinstance(f, dict) else None
        if note is not None:
            out[str(f.get("id"))] = note
    return out


def _fact(f: dict[str, Any] | None, redacted: dict[str, str]) -> dict[str, Any] | None:
    """What replay compares of a fact: id, key, content, and who proposed it. The
    content of a fact the recording holds redacted is its redaction's note, on
    both sides: it was erased, and the replay's (recomputed) is never shown."""
    if f is None:
        return None
    note = redacted.get(str(f.get("id")))
    return {
        "id": f.get("id"),
        "key": f.get("key"),
        "content": f.get("content") if note is None else note,
        "suggestor": (f.get("provenance") or {}).get("suggestor"),
    }


def _facts(a: CycleRecord, b: CycleRecord, redacted: dict[str, str]) -> Divergence | None:
    for i in range(max(len(a.facts), len(b.facts))):
        want = _fact(a.facts[i], redacted) if i < len(a.facts) else None
        got = _fact(b.facts[i], redacted) if i < len(b.facts) else None
        if want == got:
            continue
        who = str((want or got or {}).get("suggestor"))
        if got is None:
            what = f"fact {want and want['id']} was promoted in the recorded run, not in the replay"
        elif want is None:
            what = f"fact {got['id']} was promoted in the replay only"
        else:
            what = f"fact {want['id']} differs"
        note = redacted.get(str((want or got or {}).get("id")))
        if note is not None:
            what += f" (its content is not compared: {note})"
        return Divergence(
            "fact",
            a.cycle,
            who,
            want,
            got,
            f"cycle {a.cycle}, {who}: {what}",
        )
    return None


def comparable_stop(payload: dict[str, Any] | None) -> dict[str, Any] | None:
    """What replay compares of a ``run_stopped`` / ``run_paused`` payload: the stop
    reason (a time budget's elapsed milliseconds aside: time is never replayed),
    the cycles and the facts count."""
    if payload is None:
        return None
    reason = dict(payload.get("reason") or {})
    if reason.get("kind") == "time_budget_exhausted":
        reason.pop("duration_ms", None)
    return {
        "reason": reason,
        "cycles": payload.get("cycles"),
        "facts_count": payload.get("facts_count"),
    }


def _stop(recorded: Recording, replayed: Recording) -> Divergence | None:
    want, got = comparable_stop(recorded.stop), comparable_stop(replayed.stop)
    if want == got:
        return None
    cycle = int((replayed.stop or {}).get("cycles") or replayed.last_cycle)
    return Divergence(
        "stop",
        cycle,
        None,
        want,
        got,
        f"the stop differs: expected {_stop_text(want)}, got {_stop_text(got)}",
    )


def _stop_text(stop: dict[str, Any] | None) -> str:
    if stop is None:
        return "no stop (still running)"
    done = f"{counted(stop['cycles'], 'cycle')}, {counted(stop['facts_count'], 'fact')}"
    return f"{stop['reason'].get('kind')} after {done}"
