"""Suggestors of the run-service tests (issue 22): runs whose cycles take a little
time, so that a worker can be killed or a run cancelled in the middle of one.

Job files reference them as ``tests.servicejobs:NAME`` (the workers import them
from the repository root); :mod:`tests.servicefixtures` writes those files. The
seed fact says how many cycles and how long each takes: ``{"steps": N,
"sleep_ms": M}``. Every fact depends only on the facts before it, so a run killed
and recovered gives the same facts (ids and contents) as one left alone. The
test and the worker processes it starts share :class:`FileEvent` and
:class:`FilePermits` (files in a directory named by ``$CONVERGE_TEST_SHARED_DIR``).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from engine import Context, Proposal, suggestor

SHARED_ENV = "CONVERGE_TEST_SHARED_DIR"
"""Names the directory of :class:`FileEvent` and :class:`FilePermits`: set by the
test process when it imports this module, inherited by the worker processes it
starts (``converge serve``'s pool), so that both see the same files."""
POLL_S = 0.005


def _shared_dir() -> Path:
    found = os.environ.get(SHARED_ENV)
    if found is None:
        found = os.environ[SHARED_ENV] = tempfile.mkdtemp(prefix="converge-test-shared-")
        atexit.register(shutil.rmtree, found, True)
    return Path(found)


class FileEvent:
    """A ``threading.Event`` that other processes of the test see: a file."""

    def __init__(self, name: str) -> None:
        self.path = _shared_dir() / f"event-{name}"

    def set(self) -> None:
        self.path.touch()

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)

    def is_set(self) -> bool:
        return self.path.exists()

    def wait(self, timeout: float) -> bool:
        """True once set; False after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not self.is_set():
            if time.monotonic() > deadline:
                return False
            time.sleep(POLL_S)
        return True


class FilePermits:
    """A ``threading.Semaphore`` that other processes of the test share: one file a
    permit, taken by deleting it (exactly one process deletes a file)."""

    def __init__(self, name: str) -> None:
        self.path = _shared_dir() / f"permits-{name}"
        self.path.mkdir(exist_ok=True)

    def release(self, n: int = 1) -> None:
        for _ in range(n):
            (self.path / uuid.uuid4().hex).touch()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        """Take a permit; False when there is none (after ``timeout`` seconds)."""
        deadline = time.monotonic() + (timeout if timeout >= 0 else 3600)
        while True:
            for permit in self.path.iterdir():
                try:
                    permit.unlink()
                    return True
                except FileNotFoundError:
                    continue  # another process took it
            if not blocking or time.monotonic() > deadline:
                return False
            time.sleep(POLL_S)


RELEASE = FileEvent("release")
"""What :func:`held` waits for: the test sets it once it has its HTTP answer."""
HELD = FileEvent("held")
"""Set by :func:`held` when it starts waiting (the run's leg is under way)."""
HOLD_TIMEOUT_S = 60.0


def _beats(ctx: Context, after: str | None) -> list[Proposal]:
    seed = ctx.get("seed")[0].content
    done = ctx.count("beat")
    if done >= int(seed["steps"]):
        return []
    time.sleep(float(seed.get("sleep_ms", 0)) / 1000)
    since: Any = None if after is None else ctx.get(after)[-1].content
    return [Proposal("beat", {"n": done, "after": since})]


@suggestor(name="beat", dependencies=["seed", "beat"])
def beat(ctx: Context) -> list[Proposal]:
    """One ``beat`` a cycle, each after ``sleep_ms`` of work, up to the seed's ``steps``."""
    return _beats(ctx, None)


@suggestor(name="gated_beat", dependencies=["license.unknown", "beat"])
def gated_beat(ctx: Context) -> list[Proposal]:
    """Like :func:`beat`, once the gated license is known (after its approval):
    each beat carries the license as decided."""
    return _beats(ctx, "license.unknown")


@suggestor(name="held", dependencies=["license.unknown"])
def held(ctx: Context) -> list[Proposal]:
    """After the approval: waits until the test sets :data:`RELEASE` (a slow leg)."""
    HELD.set()
    if not RELEASE.wait(HOLD_TIMEOUT_S):
        raise TimeoutError("the test never released the held leg")
    return [Proposal("released", ctx.get("license.unknown")[-1].content)]
