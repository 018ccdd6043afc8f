"""``module:attribute`` references: how job files and declarative specs name objects.

A reference names a module and an attribute in it (dotted for nested attributes);
the attribute may be an object, or a class / plain factory called with no arguments.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import os
import re
import sys
from typing import Any

from engine.errors import ImportReferenceError

__all__ = ["resolve_reference"]

_REFERENCE = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


def resolve_reference(ref: str, *, call: bool = True) -> Any:
    """Import ``module:attribute``; call it when it is a class or a plain factory.

    Raises :class:`ImportReferenceError` with the reason.
    """
    if not isinstance(ref, str) or not _REFERENCE.fullmatch(ref):
        raise ImportReferenceError(
            f"{ref!r} is not a 'module:attribute' reference (dotted Python names)"
        )
    module_name, _, attr = ref.partition(":")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ImportReferenceError(f"cannot import module {module_name!r} ({exc})") from exc
    except Exception as exc:  # the module's own code failed while importing
        raise ImportReferenceError(
            f"importing module {module_name!r} raised {type(exc).__name__}: {exc}"
        ) from exc
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ImportReferenceError(
                f"module {module_name!r} has no attribute {attr!r}{_did_you_mean(obj, part)}"
            ) from None
    if call and _is_factory(obj):
        try:
            obj = obj()
        except Exception as exc:
            raise ImportReferenceError(
                f"calling {ref} failed: {type(exc).__name__}: {exc}"
            ) from exc
    return obj


def _did_you_mean(obj: Any, name: str) -> str:
    """`` (did you mean 'x'?)``: the public name of ``obj`` closest to ``name``
    (:func:`difflib.get_close_matches`), or "" when none is close."""
    names = [n for n in dir(obj) if not n.startswith("_")]
    close = difflib.get_close_matches(name, names, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _is_factory(obj: Any) -> bool:
    """Classes and plain functions (not already suggestors, criteria...) are factories."""
    if isinstance(obj, type):
        return True
    if callable(obj) and not any(
        hasattr(obj, a) for a in ("execute", "evaluate", "check", "match", "name", "id")
    ):
        return inspect.isfunction(obj) and not inspect.signature(obj).parameters
    return False
