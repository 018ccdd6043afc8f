"""Readiness of a serving process (``converge serve``, ``converge worker``): may a
load balancer or a kubelet send it work now? (docs/operations.md)

A :class:`Readiness` holds named checks (callables answering True when their
dependency is usable: the store with the current schema, the run pool, the
broker) and a draining flag that the process sets when it starts stopping
(SIGTERM), before it stops taking requests. Its answer is one word; why it is not
ready goes to this process's log (``converge.service``), never to the prober.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping

from sqlalchemy import select

from audit.store import SqlRunStore
from audit.tables import SCHEMA_VERSION, meta

__all__ = ["Check", "Readiness", "store_current"]

log = logging.getLogger("converge.service")

Check = Callable[[], bool]
"""One dependency's check: True when usable; an exception counts as False."""


def store_current(store: SqlRunStore) -> Check:
    """The check that ``store`` answers one read and records the schema version this
    code writes (:data:`audit.SCHEMA_VERSION`)."""

    def check() -> bool:
        with store.transaction(write=False, single=True) as conn:
            version = conn.execute(
                select(meta.c.value).where(meta.c.key == "schema_version")
            ).scalar()
        return version == str(SCHEMA_VERSION)

    return check


class Readiness:
    """Ready when not draining and every check of ``checks`` (name → check) passes.

    :meth:`drain` (thread- and signal-safe) turns it false for good; :meth:`ready`
    runs the checks in order, stops at the first that fails and logs its name (and
    the exception, when it raised) at warning level.
    """

    def __init__(self, checks: Mapping[str, Check] | None = None) -> None:
        self.checks: dict[str, Check] = dict(checks or {})
        self._draining = threading.Event()

    def add(self, name: str, check: Check) -> Readiness:
        """One more check, run after the others. Returns this readiness."""
        self.checks[name] = check
        return self

    def drain(self) -> None:
        """From now on, not ready: the process is stopping."""
        self._draining.set()

    @property
    def draining(self) -> bool:
        """Whether :meth:`drain` was called."""
        return self._draining.is_set()

    def ready(self) -> bool:
        """True when not draining and every check passes (see the class)."""
        if self.draining:
            return False
        for name, check in self.checks.items():
            try:
                passed = check()
            except Exception as exc:  # a probe never raises: the reason goes to our log
                log.warning("not ready: %s failed: %s: %s", name, type(exc).__name__, exc)
                return False
            if not passed:
                log.warning("not ready: %s", name)
                return False
        return True
