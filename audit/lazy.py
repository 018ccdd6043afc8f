"""Package faces that load their private modules on first use (PEP 562).

Each sub-package of ``audit`` (``audit.trail``, ``audit.ledger``...) names what it
offers in its ``__init__`` and keeps the code in underscored modules. Its face
imports nothing when the package is imported: a name is looked up in its module on
first access. So importing one private module (``audit.core`` imports the writer
of ``audit.trail``) never runs the rest of the package, and the modules of
``audit`` may import each other's private modules in any order without cycles.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["face"]


def face(package: str, offers: Mapping[str, tuple[str, ...]]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``'s face: ``offers`` maps each private
    module (``"_chain"``) to the names it offers. Raises ``AttributeError`` for a
    name the face does not offer, as a module does."""
    where = {name: module for module, names in offers.items() for name in names}

    def load(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        vars(importlib.import_module(package))[name] = value  # later reads skip this
        return value

    return load
