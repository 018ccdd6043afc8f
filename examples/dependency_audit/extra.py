"""The third-party libraries the dependency audit needs: the ``examples`` extra.

license-expression parses SPDX expressions and packaging evaluates ``Requires-Dist``
markers. Both are imported lazily where they are used; :func:`require_examples_extra`
runs when the package is imported, so a job that names the audit's suggestors
fails as it loads, with one line naming the extra, rather than with a
``ModuleNotFoundError`` traceback from inside a suggestor mid-run.
"""

from __future__ import annotations

import importlib

__all__ = ["EXTRA_HINT", "REQUIRED_MODULES", "require_examples_extra"]

REQUIRED_MODULES = ("license_expression", "packaging.requirements")
"""The modules of the ``examples`` extra (license-expression, packaging)."""

EXTRA_HINT = "the dependency audit needs the 'examples' extra: pip install -e '.[examples]'"
"""The one-line hint every missing-library error of the example carries."""


def require_examples_extra() -> None:
    """Import each of :data:`REQUIRED_MODULES`.

    Raises ``ImportError`` with :data:`EXTRA_HINT` and the missing module's name
    when one cannot be imported.
    """
    for name in REQUIRED_MODULES:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise ImportError(f"{EXTRA_HINT} ({name.split('.')[0]} is missing)") from exc
