"""Where a job file's ``module:attribute`` references import from.

Besides the current directory, a job's references import from its
:func:`import_root`: the job file's directory, or the first ancestor of it that
is not a package, so that a job file inside a package finds that package.
"""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["add_import_root", "import_root"]


def import_root(job_path: str) -> Path | None:
    """The directory a job file's ``module:attribute`` references import from, besides
    the current directory: the job file's directory, or, when that is a package
    (it holds an ``__init__.py``), the first ancestor that is not one — so that
    ``examples/dependency_audit/job.yaml`` finds ``examples.dependency_audit``.
    None for a job that is not a file."""
    if not job_path or job_path.startswith("<"):
        return None
    directory = Path(job_path).absolute().parent
    while (directory / "__init__.py").is_file() and directory.parent != directory:
        directory = directory.parent
    return directory


def add_import_root(job_path: str) -> None:
    """Put :func:`import_root` on ``sys.path`` (after the entries already there)."""
    root = import_root(job_path)
    if root is not None and str(root) not in sys.path:
        sys.path.append(str(root))
