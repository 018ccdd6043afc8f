"""Starting a run: its id, its initial facts (provenance ``"input"``), its first event."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from typing import Any

from engine._cycle.recording import record_start
from engine._cycle.run import Listener, Run
from engine.errors import ConfigurationError
from engine.facts import INPUT_SOURCE, Fact, Provenance, content_key
from engine.run_ids import check_run_id
from engine.settings import EngineSettings


def start(
    settings: EngineSettings,
    initial: Mapping[str, Iterable[Any]] | None,
    run_id: str | None,
    listener: Listener | None = None,
) -> Run:
    """A new run: initial facts (provenance ``"input"``) in, their keys dirty, recorded
    (and handed to ``listener``, who streams it, from its first event).

    Raises :class:`ConfigurationError` for bad ``initial`` input, and
    ``InvalidRunId`` (one) for a ``run_id`` that is no run id (``engine.run_ids``).
    """
    run = Run(new_run_id() if run_id is None else check_run_id(run_id), settings.budget)
    if getattr(settings.store, "fact_commitments", False):  # the store's chain format 2
        run.commit_by_salts()
    run.stream_to(listener)
    run.spend.start_leg(settings.clock(), time.time())
    settings.runs.enter(run.run_id, clear_cancel=True)
    if initial:
        _promote_initial(run, initial)
    if settings.store is not None or run.listener is not None:
        record_start(settings, run)
    return run


def new_run_id() -> str:
    """16 hex digits, as ``uuid.uuid4().hex[:16]`` (the version nibble included),
    from 8 random bytes: the uuid module's own code costs more at each start."""
    b = bytearray(os.urandom(8))
    b[6] = (b[6] & 0x0F) | 0x40
    return b.hex()


def _promote_initial(run: Run, initial: Mapping[str, Iterable[Any]]) -> None:
    facts = run.facts
    if type(initial) is not dict and not isinstance(initial, Mapping):
        raise ConfigurationError("initial must map keys to lists of contents")
    for key, contents in initial.items():
        if not isinstance(key, str) or not key:
            raise ConfigurationError(f"initial key {key!r} must be a non-empty string")
        if type(contents) is not list and (
            isinstance(contents, str | bytes) or not isinstance(contents, Iterable)
        ):
            raise ConfigurationError(
                f"initial[{key!r}] must be a list of contents, got {type(contents).__name__}"
            )
        for j, content in enumerate(contents):
            try:
                identity = (key, content_key(content))
            except (TypeError, ValueError) as exc:
                raise ConfigurationError(
                    f"initial[{key!r}][{j}] is not JSON-serialisable: {exc}"
                ) from exc
            if facts.has_identity(identity):
                continue
            fact = Fact(
                facts.next_id(key),
                key,
                content,
                1.0,
                Provenance(INPUT_SOURCE, 0, f"input/{key}/{j}"),
            )
            facts.promote(fact, identity)
            run.cursor.note_changed((key,))
