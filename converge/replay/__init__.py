"""Replay: re-execute a recorded run without calling a model, and say where it parts.

``converge replay RUN`` (and :func:`replay_run`) runs the job of a recorded run
again, from the run's recorded initial facts and budget, against a scratch store;
LLM agents get the model responses the run recorded (no model is called) and
suggestors marked non-deterministic give back their recorded outputs. Every cycle
must promote the same facts (ids, keys, content) and the run must end with the
same stop; the :class:`ReplayReport` names the first divergence (cycle,
suggestor, expected vs got). ``live=True`` calls the models instead and reports
what differs. See docs/time-travel.md.

The modules: :mod:`~converge.replay.recording` (a run as its events tell it),
:mod:`~converge.replay.recorded` (a non-deterministic suggestor played back),
:mod:`~converge.replay.compare` (the divergences), :mod:`~converge.replay.report`
(:class:`ReplayReport`) and :mod:`~converge.replay.runner` (:func:`replay_run`).
"""

from __future__ import annotations

from converge.replay.compare import Divergence, DivergenceKind
from converge.replay.recorded import NotRecorded, RecordedSuggestor
from converge.replay.recording import Recording, read_recording
from converge.replay.report import ReplayReport
from converge.replay.runner import EngineFactory, ReplayError, replay_run

__all__ = [
    "Divergence",
    "DivergenceKind",
    "EngineFactory",
    "NotRecorded",
    "RecordedSuggestor",
    "Recording",
    "ReplayError",
    "ReplayReport",
    "read_recording",
    "replay_run",
]
