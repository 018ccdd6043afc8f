"""mkdocs hook: every public class, function and method of the API pages has a docstring.

The API pages (``docs/api/*.md``) render each package's ``__all__`` with mkdocstrings;
a name without a docstring would show as an empty entry. At the start of each build,
this hook imports the documented modules and logs a WARNING per public class or
function of their public names without a docstring, and per public method or
property (defined by the class itself) of a concrete class without one; protocol
members are described by their protocol's docstring. ``mkdocs build --strict`` turns
the warnings into a failure.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import logging
import re
from collections.abc import Iterable, Iterator
from types import ModuleType
from typing import Any

log = logging.getLogger("mkdocs.plugins.converge_docstrings")

MODULES = (
    "engine",
    "criteria",
    "gates",
    "audit",
    "converge",
    "converge.jobs",
    "converge.reports",
)
"""The modules of the API pages (``docs/api/``): each lists its ``__all__``."""


def public_names(module: ModuleType, names: Iterable[str] | None = None) -> Iterator[str]:
    """The documented names of ``module``: ``names``, else its ``__all__``."""
    yield from names if names is not None else getattr(module, "__all__", ())


def _members(cls: type) -> Iterator[tuple[str, Any]]:
    """Public methods and properties defined by ``cls`` itself (not inherited)."""
    for attr, value in vars(cls).items():
        if attr.startswith("_"):
            continue
        if isinstance(value, property):
            yield attr, value.fget
        elif isinstance(value, staticmethod | classmethod):
            yield attr, value.__func__
        elif inspect.isfunction(value):
            yield attr, value


def _undocumented(obj: Any) -> bool:
    doc = (getattr(obj, "__doc__", None) or "").strip()
    if inspect.isclass(obj) and (dataclasses.is_dataclass(obj) or hasattr(obj, "_fields")):
        # a dataclass or a named tuple without a docstring gets its signature as one
        return re.fullmatch(rf"{re.escape(obj.__name__)}\(.*\)", doc) is not None
    return not doc


def missing_docstrings(module: ModuleType, names: Iterable[str] | None = None) -> list[str]:
    """``module.Name`` (or ``module.Name.method``) of every public class or function of
    ``module`` without a docstring, and of every public method of a concrete class."""
    missing: list[str] = []
    for name in public_names(module, names):
        obj = getattr(module, name)
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue
        if _undocumented(obj):
            missing.append(f"{module.__name__}.{name}")
        if inspect.isclass(obj) and not getattr(obj, "_is_protocol", False):
            missing.extend(
                f"{module.__name__}.{name}.{attr}"
                for attr, fn in _members(obj)
                if fn is not None and _undocumented(fn)
            )
    return missing


def on_pre_build(config: Any) -> None:
    """Log a WARNING per missing docstring of the documented modules (and per
    module without ``__all__``, whose page would list nothing)."""
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        if not hasattr(module, "__all__"):
            log.warning("%s has no __all__: its API page lists no name", module_name)
        for path in missing_docstrings(module):
            log.warning("missing docstring: %s (the API pages list it)", path)
