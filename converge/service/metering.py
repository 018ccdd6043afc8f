"""Whether this process records Prometheus metrics, and where a pool's processes
write them (docs/operations.md), without importing ``prometheus_client`` first.

``converge serve`` and ``converge worker --health-port`` call
:func:`shared_directory` before anything imports ``prometheus_client``: it creates
a directory, names it in ``PROMETHEUS_MULTIPROC_DIR`` (inherited by every child
process: the serve pool's ``converge worker --runs-from-stdin``, Celery's prefork
processes, the deadline keeper) and removes it when the process ends. Each
process then writes its values to files there (prometheus_client's multiprocess
mode) and the one serving ``/metrics`` sums them. :func:`recording` is
:mod:`converge.metrics` in a process that records (it imported it, or its parent
named that directory), None elsewhere: ``converge run`` pays nothing.
"""

from __future__ import annotations

import atexit
import importlib
import os
import shutil
import sys
import tempfile
from types import ModuleType

__all__ = ["MULTIPROC_ENV", "recording", "shared_directory"]

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
"""prometheus_client's variable: the directory of a pool's value files."""


def shared_directory() -> str:
    """The directory of this process tree's value files: ``$PROMETHEUS_MULTIPROC_DIR``
    when the operator set it (kept, its old files removed: counters restart with the
    process), else a new one, named there and removed at exit."""
    given = os.environ.get(MULTIPROC_ENV)
    if given:
        os.makedirs(given, exist_ok=True)
        for name in os.listdir(given):
            if name.endswith(".db"):
                os.remove(os.path.join(given, name))
        return given
    made = tempfile.mkdtemp(prefix="converge-metrics-")
    os.environ[MULTIPROC_ENV] = made
    owner = os.getpid()

    def remove() -> None:
        if os.getpid() == owner:  # not in a forked child that exits
            shutil.rmtree(made, ignore_errors=True)

    atexit.register(remove)
    return made


def recording() -> ModuleType | None:
    """:mod:`converge.metrics` when this process records metrics (imported already,
    or ``PROMETHEUS_MULTIPROC_DIR`` set by the parent), None otherwise or when
    ``prometheus-client`` is not installed."""
    metrics = sys.modules.get("converge.metrics")
    if metrics is not None or not os.environ.get(MULTIPROC_ENV):
        return metrics
    try:
        return importlib.import_module("converge.metrics")
    except Exception:  # the extra missing: nothing recorded, the run goes on
        return None
