"""What a run's summary says comes next: the commands that continue a paused run
(``next: converge approve GATE --by NAME``), or for a recorded run that stopped, those
that look at its findings, replay it and export its proof; and what a paused run holds
back at its gate. Plain text only: :mod:`converge.cli.render` prints it."""

from __future__ import annotations

import os
import shlex
from collections import Counter

from audit import SqlRunStore
from audit.core import SIGNING_KEY_ENV  # naming it imports no signing room
from engine import ConvergeError, HitlGatePending, RunResult, RunStore, StopReason
from engine.result import counted
from engine.stop import CycleBudgetExhausted

__all__ = ["next_commands", "next_lines", "waiting_at_gate"]

ALIGN_WITHIN = 48
"""Comments are aligned after the commands up to this long."""


def _db(db: str | None) -> str:
    """`` --db DB`` when the command was given one (so the next command finds the run)."""
    return "" if not db else f" --db {shlex.quote(db)}"


def next_commands(
    reason: StopReason, run_id: str = "", db: str | None = None, *, reports: bool = False
) -> list[tuple[str, str]]:
    """The commands that come after a stop, each with what it does ("" for the
    commands of a pause, which need no word): a run paused at a gate, those that
    decide it (with their required options); another recorded stop (``run_id``
    given), those that show its findings (``report`` when the job has report tables,
    else ``facts``), replay it and export its proof bundle, and for a cycle budget
    spent, the resume with more cycles. ``db``: the ``--db`` the command was given."""
    where = _db(db)
    if isinstance(reason, HitlGatePending):
        gate = reason.gate_id
        return [
            (f"converge approve {gate} --by NAME{where}", ""),
            (f"converge reject {gate} --by NAME --reason WHY{where}", ""),
        ]
    if not run_id:
        return []
    found = (
        (f"converge report {run_id}{where}", "the findings again (--format markdown, csv, json)")
        if reports
        else (f"converge facts {run_id}{where}", "the facts, with their provenance")
    )
    key = "" if os.environ.get(SIGNING_KEY_ENV) else " --signing-key KEY"
    steps = [
        found,
        (f"converge show {run_id}{where}", "the run: timeline, stop, budget"),
        (f"converge replay {run_id}{where}", "run it again: the same facts and stop?"),
        (
            f"converge export {run_id} --proof run-{run_id[:8]}.json{where}{key}",
            "its proof bundle, checked offline" + (" (converge keys generate)" if key else ""),
        ),
    ]
    if isinstance(reason, CycleBudgetExhausted):
        steps.insert(
            0, (f"converge resume {run_id} --add-cycles 10{where}", "go on with more cycles")
        )
    return steps


def next_lines(
    reason: StopReason, run_id: str = "", db: str | None = None, *, reports: bool = False
) -> list[str]:
    """:func:`next_commands` as the lines printed: ``next: COMMAND  # what it does``,
    then ``  or: ...``, the comments aligned (a shell ignores them: a line pastes as is)."""
    steps = next_commands(reason, run_id, db, reports=reports)
    # aligned on the shorter commands; a longer one (export's) is not waited for
    width = max((len(c) for c, _ in steps if len(c) <= ALIGN_WITHIN), default=0)
    return [
        f"{label} {command.ljust(width) + '  # ' + what if what else command}"
        for label, (command, what) in zip(
            ("next:", *["  or:"] * (len(steps) - 1)), steps, strict=True
        )
    ]


def waiting_at_gate(store: RunStore | None, result: RunResult) -> str:
    """What a run paused at a gate holds back, one line: ``1 waiting for a human
    decision at gate G (license.unknown); 50 more proposals of cycle 2 (license: 50)
    merged after it``. "" for any other stop, or when the checkpoint of the pause
    cannot be read (the summary then shows only the criteria)."""
    reason = result.stop_reason
    if not isinstance(reason, HitlGatePending) or not isinstance(store, SqlRunStore):
        return ""
    try:
        checkpoint = store.load_checkpoint(result.run_id)
        effects = checkpoint["merge_effects"]
        effect, index = checkpoint["merge_pos"]
        gated = effects[effect][1][index]
        after = [p for _, ps in effects[effect + 1 :] for p in ps]
        rest = [*effects[effect][1][index + 1 :], *after]
        keys = Counter(str(p["key"]) for p in rest)
    except (ConvergeError, KeyError, IndexError, TypeError, ValueError):
        return ""
    line = f"1 waiting for a human decision at gate {reason.gate_id} ({gated.get('key')})"
    if rest:
        by_key = ", ".join(f"{k}: {n}" for k, n in keys.most_common())
        line += (
            f"; {counted(len(rest), 'more proposal')} of cycle {checkpoint.get('cycle')} "
            f"({by_key}) merged after the decision"
        )
    return line
