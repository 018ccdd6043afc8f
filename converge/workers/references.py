"""The ``module:attr`` reference a worker imports to find a suggestor.

A worker rebuilds a suggestor from its reference with
:func:`engine.resolve_reference`, so the reference must resolve to a suggestor
of the same name on the worker. Job files give them (``suggestors:``); for a
suggestor registered from Python, :func:`reference_of` finds the module-level
name it is bound to.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

from engine import ConfigurationError, FunctionSuggestor, Suggestor

__all__ = ["reference_of"]


def reference_of(s: Suggestor, given: Mapping[str, str] | None = None) -> str:
    """``module:attr`` naming suggestor ``s``: ``given[s.name]`` when there, else the
    module-level attribute that *is* ``s`` (or a list or tuple holding it: the worker
    picks it by name) in the module defining it (its ``defined_in`` when it has one,
    as agents do, else its function's or class's module).

    Raises :class:`ConfigurationError` when there is none (a suggestor built
    inside a function, in ``__main__``, or a lambda), naming the suggestor.
    """
    if given and s.name in given:
        return given[s.name]
    fn = s.callables()[0] if type(s) is FunctionSuggestor else None
    # a suggestor object may say which module built it (an agent: defined_in)
    module_name = getattr(s, "defined_in", None) or getattr(
        fn if fn is not None else type(s), "__module__", None
    )
    module = sys.modules.get(module_name or "")
    if module is not None and module_name != "__main__":
        for attr, value in vars(module).items():
            if value is s:
                return f"{module_name}:{attr}"
        for attr, value in vars(module).items():  # one of a module-level list of them
            if isinstance(value, list | tuple) and any(v is s for v in value):
                return f"{module_name}:{attr}"
    raise ConfigurationError(
        f"suggestor {s.name!r} cannot be shipped to a worker: it is not a module-level "
        f"name of an importable module ({module_name or 'no module'}); define it at "
        "module level, or name it in a job file's suggestors: (module:attr)"
    )
