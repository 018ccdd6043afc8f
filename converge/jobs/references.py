"""Where a job file's ``module:attribute`` references import from.

A job's references import from its :func:`import_root` (the job file's
directory, or the first ancestor of it that is not a package, so that a job file
inside a package finds that package), then from the current directory, then
from the installed packages.

converge's own packages (:data:`FRAMEWORK_PACKAGES`) cannot be shadowed: they
are imported before any job module, so ``from criteria import criterion`` in a
job module is converge's ``criteria`` even when a ``criteria.py`` sits next to the
job. A job module whose name is already taken in this process by another module
(converge's own, or another job's module of the same name) is loaded by file
path under a private name (``converge_job_<hash>.<name>``, one per directory), so
``criteria: [criteria:has_c]`` finds ``has_c`` in the ``criteria.py`` next to the
job file.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

# imported before any job module, so that no file of a job can take their names
import audit  # noqa: F401
import criteria  # noqa: F401
import engine  # noqa: F401
import gates  # noqa: F401
from engine import ImportReferenceError
from engine.references import resolve_reference

__all__ = [
    "FRAMEWORK_PACKAGES",
    "PRIVATE_PREFIX",
    "add_import_root",
    "import_root",
    "resolve_job_reference",
]

FRAMEWORK_PACKAGES = ("engine", "criteria", "gates", "audit", "converge")
"""converge's import packages: a job module of one of these names is loaded under a
private name, and ``import NAME`` in a job module always means converge's."""

PRIVATE_PREFIX = "converge_job_"
"""The prefix of the private package a job directory's shadowed modules load under."""

_FRAMEWORK_ROOT = Path(__file__).resolve().parents[2]
"""The directory holding converge's packages (a job module found there is converge's)."""


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


def resolve_job_reference(ref: str, job_path: str, *, call: bool = True) -> Any:
    """Import the ``module:attribute`` reference ``ref`` of the job file ``job_path``
    (call it when it is a class or a plain factory, as
    :func:`engine.references.resolve_reference` does).

    The module is looked up in the job's :func:`import_root`, then the current
    directory, then the installed packages. A module found next to the job whose
    name is taken by another module (one of :data:`FRAMEWORK_PACKAGES`, or a
    module of the same name from another directory) is loaded by file path under
    a private name. Raises :class:`ImportReferenceError` with the reason; when a
    job module fails because a file next to the job has the name of one of
    converge's packages, the message names that file and the name.
    """
    add_import_root(job_path)
    module_name, sep, _ = ref.partition(":") if isinstance(ref, str) else ("", "", "")
    top = module_name.split(".")[0]
    found = _job_module(top, job_path) if sep and top.isidentifier() else None
    if found is not None and _taken(top, found[1]):
        return _resolve_private(ref, found[0], call=call)
    try:
        return resolve_reference(ref, call=call)
    except ImportReferenceError as exc:
        hint = _collision_hint(str(exc), job_path)
        if hint is None:
            raise
        raise ImportReferenceError(f"{exc}; {hint}") from exc


def _search_dirs(job_path: str) -> list[Path]:
    """The job's import root, then the current directory (each once)."""
    dirs: list[Path] = []
    root = import_root(job_path)
    for d in (root, Path.cwd()):
        if d is not None and d.resolve() not in [x.resolve() for x in dirs]:
            dirs.append(d)
    return dirs


def _module_file(directory: Path, name: str) -> Path | None:
    """``directory/name.py`` or ``directory/name/__init__.py``, when there is one."""
    for candidate in (directory / f"{name}.py", directory / name / "__init__.py"):
        if candidate.is_file():
            return candidate.resolve()
    return None


def _job_module(name: str, job_path: str) -> tuple[Path, Path] | None:
    """The first ``(directory, file)`` of a module ``name`` next to the job (its
    import root, then the current directory); converge's own packages excluded."""
    for directory in _search_dirs(job_path):
        if directory.resolve() == _FRAMEWORK_ROOT and name in FRAMEWORK_PACKAGES:
            continue
        found = _module_file(directory, name)
        if found is not None:
            return directory.resolve(), found
    return None


def _taken(name: str, file: Path) -> bool:
    """Whether importing ``name`` would give another module than ``file``."""
    if name in FRAMEWORK_PACKAGES:
        return True
    loaded = sys.modules.get(name)
    if loaded is not None:
        origin = getattr(loaded, "__file__", None)
    else:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            return True
        origin = spec.origin if spec is not None else None
    return origin is None or Path(origin).resolve() != file


def _resolve_private(ref: str, directory: Path, *, call: bool) -> Any:
    """Resolve ``ref`` from ``directory`` under the private package of that directory."""
    digest = hashlib.sha256(str(directory).encode()).hexdigest()[:12]
    package = f"{PRIVATE_PREFIX}{digest}"
    if package not in sys.modules:
        spec = importlib.machinery.ModuleSpec(package, None, is_package=True)
        spec.submodule_search_locations = [str(directory)]
        module = importlib.util.module_from_spec(spec)
        module.__doc__ = f"The modules of the job directory {directory}."
        sys.modules[package] = module
    try:
        return resolve_reference(f"{package}.{ref}", call=call)
    except ImportReferenceError as exc:
        raise ImportReferenceError(str(exc).replace(f"{package}.", "")) from exc


def _collision_hint(message: str, job_path: str) -> str | None:
    """Name the job's file that has the name of one of converge's packages, when
    ``message`` (an import error) is about that name."""
    for name in FRAMEWORK_PACKAGES:
        if f"'{name}'" not in message and f"'{name}." not in message:
            continue
        found = _job_module(name, job_path)
        if found is None:
            continue
        shown = os.path.relpath(found[1]) if _is_below(found[1], Path.cwd()) else str(found[1])
        return (
            f"{shown} is named like converge's package {name!r} (engine, criteria, gates, "
            f"audit and converge are taken): in a job module 'import {name}' is converge's; "
            f"rename {shown}, or refer to it only from the job file ({name}:NAME)"
        )
    return None


def _is_below(path: Path, directory: Path) -> bool:
    try:
        path.relative_to(directory.resolve())
    except ValueError:
        return False
    return True
