"""Time travel: a recorded run forked at a cycle, two runs compared, a run replayed.

- Fork (``converge fork``, :func:`fork_run`): a new run from the state after cycle
  N of a recorded run, its parent unchanged and verified up to there (``_fork``);
  :func:`record_fork` records one for a worker to drive.
- Diff (``converge diff``, :func:`diff_runs` of two :func:`snapshot`): the stops
  and the facts only in one run, or changed (``_diff``).
- Replay (``converge replay``, :func:`replay_run`): the job of a recorded run run
  again against a scratch store, LLM agents given the model responses the run
  recorded and non-deterministic suggestors their recorded outputs; the
  :class:`ReplayReport` names the first divergence (cycle, suggestor, expected vs
  got). The run as its events tell it (``_recording``), a non-deterministic
  suggestor played back (``_recorded``), the divergences (``_compare``), the report
  (``_report``) and the replay itself (``_replay``).

See docs/time-travel.md. Its errors (``ForkError``, ``ReplayError``,
``NotRecorded``) are in :mod:`engine.errors` and :mod:`converge.errors`.
"""

from __future__ import annotations

from converge.timetravel._compare import Divergence, DivergenceKind
from converge.timetravel._diff import RunDiff, RunSnapshot, diff_runs, snapshot
from converge.timetravel._fork import BUDGET_FIELDS, fork_budget, fork_run, record_fork
from converge.timetravel._recorded import RecordedSuggestor
from converge.timetravel._recording import Recording, read_recording
from converge.timetravel._replay import EngineFactory, replay_run
from converge.timetravel._report import ReplayReport

__all__ = [
    "BUDGET_FIELDS",
    "Divergence",
    "DivergenceKind",
    "EngineFactory",
    "RecordedSuggestor",
    "Recording",
    "ReplayReport",
    "RunDiff",
    "RunSnapshot",
    "diff_runs",
    "fork_budget",
    "fork_run",
    "read_recording",
    "record_fork",
    "replay_run",
    "snapshot",
]
