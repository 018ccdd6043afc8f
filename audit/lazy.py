"""Package faces that load their private modules on first use (PEP 562).

Each sub-package of ``audit`` (``audit.trail``, ``audit.ledger``...) names what it
offers in its ``__init__`` (``__all__``) and keeps the code in underscored modules.
Its face imports nothing when the package is imported: a name is looked up in its
modules on first access. So importing one private module (``audit.core`` imports
the writer of ``audit.trail``) never runs the rest of the package, and the modules
of ``audit`` may import each other's private modules in any order without cycles.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["face"]


def face(package: str, offers: Sequence[str], modules: Sequence[str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``'s face: a name of ``offers`` (its
    ``__all__``) is taken from the first of its private ``modules`` (``"_chain"``)
    that defines it, then kept in the package. Raises ``AttributeError`` for a name
    the face does not offer, as a module does."""
    offered = frozenset(offers)

    def load(name: str) -> Any:
        if name in offered:
            for module in modules:
                found = vars(importlib.import_module(f"{package}.{module}"))
                if name in found:
                    vars(importlib.import_module(package))[name] = found[name]
                    return found[name]
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return load
