"""Every name a docstring points to exists (issue 55): a dotted name of our packages
(``engine.stop_reference.write_stop_reasons_doc``, ``audit.trail``) resolves to a
module or an attribute of one, and a path of ours (``engine/_cycle/steps.py``,
``converge/web/``) is a file or folder of the repository. Docstrings of modules,
classes and functions of the packages, and of the tests' helpers, are read; a
docstring naming a module that moved misleads the next reader.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("engine", "criteria", "gates", "audit", "converge")
DOTTED = re.compile(
    r"(:(?:mod|class|func|meth|data|attr|exc):)?`+~?"
    r"((?:engine|criteria|gates|audit|converge)(?:\.[A-Za-z_]\w*)+)(?:\(\))?`+"
)
"""A dotted name in backquotes. Two-part names (``gates.status`` is also a column,
``converge.db`` a file) count only in a Sphinx role (``:mod:`audit.trail```)."""
PATH = re.compile(
    r"(?<![\w/.-])((?:engine|criteria|gates|audit|converge|tests|docs)/[\w/.-]*(?:\.(?:py|md|yaml|yml|toml|html|json)\b|/))"
)
"""A path of ours ending in a file's extension or a folder's slash."""
OPTIONAL = ("converge.agents.local", "audit.models")
"""Modules behind extras that may be missing where the names are only resolved."""


def _docstrings(path: Path) -> Iterator[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                body = node.body[0]
                yield body.lineno, doc


def resolves(dotted: str) -> bool:
    """Whether ``dotted`` is a module of ours or an attribute reached from one."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            if not hasattr(target, name):
                annotations = getattr(target, "__annotations__", {})
                fields = getattr(target, "model_fields", {}) or getattr(
                    target, "__dataclass_fields__", {}
                )
                return name in annotations or name in fields  # a field, set on instances
            target = getattr(target, name)
        return True
    return False


def unresolved(paths: list[Path]) -> list[str]:
    """Each dotted name or path a docstring of ``paths`` names that is not there."""
    found = []
    for path in paths:
        where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
        for line, doc in _docstrings(path):
            for role, name in sorted(set(DOTTED.findall(doc))):
                if name.count(".") < 2 and not role:
                    continue
                if not name.startswith(OPTIONAL) and not resolves(name):
                    found.append(f"{where}:{line}: {name}")
            for named in sorted(set(PATH.findall(doc))):
                if "*" not in named and not (ROOT / named.rstrip("/.")).exists():
                    found.append(f"{where}:{line}: {named}")
    return found


def _sources() -> list[Path]:
    files = [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")]
    return sorted(files + list((ROOT / "tests").glob("*.py")))


def test_every_name_a_docstring_mentions_resolves() -> None:
    missing = unresolved(_sources())
    assert missing == [], "docstrings name what is not there:\n" + "\n".join(missing)


@pytest.mark.parametrize(
    ("doc", "reported"),
    [
        ("as ``engine.stop_reference.write_stop_reasons_doc``", []),
        ("see ``engine.stop.write_stop_reasons_doc``", ["engine.stop.write_stop_reasons_doc"]),
        ("lives in :mod:`audit.gone`", ["audit.gone"]),
        ("the ``gates.status`` column", []),
        ("moved: ``audit.trail.gone``", ["audit.trail.gone"]),
        ("drawn by docs/hooks/architecture.py", []),
        ("kept in engine/nowhere.py", ["engine/nowhere.py"]),
    ],
)
def test_a_moved_name_is_reported(tmp_path: Path, doc: str, reported: list[str]) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(f'"""{doc}."""\n', encoding="utf-8")
    assert [f.rsplit(": ", 1)[1] for f in unresolved([probe])] == reported
