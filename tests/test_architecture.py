"""The layout DESIGN.md §2 fixes: small engine modules, a thin Engine, no import cycles.

Every ``import`` statement counts, at module level, inside a function or under
``TYPE_CHECKING`` (import-linter checks the direction between packages; this
checks cycles between modules and the sizes).
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("engine", "criteria", "gates", "audit", "converge")
MAX_ENGINE_MODULE_LINES = 500
MAX_ENGINE_CLASS_LINES = 300


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found[_module_name(path)] = path
    return found


def _imports(path: Path, name: str, known: set[str]) -> set[str]:
    """The project modules ``path`` imports anywhere in its body."""
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".")
                anchor = anchor if is_package else anchor[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            # ``from pkg import sub`` imports the submodule when there is one
            targets = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names
            ]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def _import_graph() -> nx.DiGraph:
    modules = _modules()
    known = set(modules)
    graph: nx.DiGraph = nx.DiGraph()
    for name, path in modules.items():
        graph.add_node(name)
        for target in _imports(path, name, known):
            graph.add_edge(name, target)
    return graph


def test_no_two_modules_import_each_other_directly_or_through_others() -> None:
    graph = _import_graph()
    cycles = list(nx.simple_cycles(graph))
    assert cycles == [], f"import cycles: {cycles[:5]}"


def test_the_engine_imports_none_of_the_packages_built_on_it() -> None:
    graph = _import_graph()
    outward = sorted(
        (a, b)
        for a, b in graph.edges
        if a.split(".")[0] == "engine" and b.split(".")[0] != "engine"
    )
    assert outward == []


def test_the_import_walk_sees_lazy_and_type_checking_imports(tmp_path: Path) -> None:
    # the checks above are only worth trusting if the walk finds hidden imports
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from engine.engine import Engine\n"
        "def f():\n    import audit\n    from gates.policies import x\n    from . import stop\n",
        encoding="utf-8",
    )
    known = {"engine", "engine.engine", "engine.stop", "engine.probe", "audit", "gates.policies"}
    found = _imports(probe, "engine.probe", known)
    assert found == {"engine.engine", "audit", "gates.policies", "engine.stop"}


def test_no_engine_module_is_over_500_lines() -> None:
    sizes = {
        p.name: len(p.read_text(encoding="utf-8").splitlines())
        for p in (ROOT / "engine").glob("*.py")
    }
    assert {n: s for n, s in sizes.items() if s > MAX_ENGINE_MODULE_LINES} == {}


def test_the_engine_class_is_a_facade_under_300_lines() -> None:
    tree = ast.parse((ROOT / "engine" / "engine.py").read_text(encoding="utf-8"))
    engine = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Engine")
    assert engine.end_lineno is not None
    assert engine.end_lineno - engine.lineno + 1 < MAX_ENGINE_CLASS_LINES
    classes = [
        n
        for p in (ROOT / "engine").glob("*.py")
        for n in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
        if isinstance(n, ast.ClassDef)
    ]
    too_long = [c.name for c in classes if (c.end_lineno or 0) - c.lineno >= 300]
    assert too_long == []
