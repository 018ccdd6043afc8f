"""Rooms meet at their faces (DESIGN.md §2): a room is a package (``audit.trail``,
``converge.web``, ``engine``), its face its ``__init__``; an underscored module is
private to the package above it. No module of the application packages imports
another room's private module, at module level, inside a function or under
``TYPE_CHECKING`` (the import walk of tests/test_architecture.py). import-linter
holds the same per room of ``audit`` (pyproject.toml, "Rooms meet at their faces").
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from tests.test_architecture import PRIVATE_CHECKED, ROOT, _import_graph, _modules, _package


def _private_owner(module: str) -> str | None:
    """The room whose private module ``module`` is (``audit.trail`` for
    ``audit.trail._chain``, ``engine`` for ``engine._cycle.run``), None for a public one."""
    parts = module.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:i])
    return None


def _private_imports(modules: Mapping[str, Path], checked: tuple[str, ...]) -> list[str]:
    """Each import by a module of the ``checked`` packages of another room's private
    module, as ``importer -> imported``."""
    graph = _import_graph(modules)
    found = []
    for importer, imported in sorted(graph.edges):
        owner = _private_owner(imported)
        if owner is None or importer.split(".")[0] not in checked:
            continue
        if importer != owner and not importer.startswith(f"{owner}."):
            found.append(f"{importer} -> {imported}")
    return found


def test_no_module_imports_another_rooms_private_module() -> None:
    found = _private_imports(_modules(ROOT), PRIVATE_CHECKED)
    assert found == [], "private modules imported from another room:\n" + "\n".join(found)


def test_an_import_of_another_rooms_private_module_is_reported(tmp_path: Path) -> None:
    _package(
        tmp_path,
        "pkg",
        {
            "_shared.py": "X = 1\n",
            "user.py": "def f():\n    from pkg.room._inner import Y\n",
            "face_user.py": "from pkg.room import Y\nfrom pkg import _shared\n",
        },
    )
    (tmp_path / "pkg" / "room").mkdir()
    (tmp_path / "pkg" / "room" / "__init__.py").write_text(
        "from pkg.room._inner import Y\n", encoding="utf-8"
    )
    (tmp_path / "pkg" / "room" / "_inner.py").write_text(
        "from pkg._shared import X\nY = X\n", encoding="utf-8"
    )
    # the face imports its own private module, and pkg's modules pkg's: both pass
    assert _private_imports(_modules(tmp_path), ("pkg",)) == ["pkg.user -> pkg.room._inner"]
