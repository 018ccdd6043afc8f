"""The layout DESIGN.md §2 fixes, for every package of the repository: small modules and
classes, a thin Engine, no import cycles, an engine that imports nothing built on it.

The packages are the top-level directories holding ``.py`` files (hidden ones and
``.venv`` aside), so a new one is checked without being listed. Every import
counts: at module level, inside a function, under ``TYPE_CHECKING``, and
``importlib.import_module("literal")`` (import-linter checks the direction between
the application packages; this checks cycles between modules and the sizes).
How long functions and the followed paths are is a figure for readers, printed into
docs/architecture.md by ``docs/hooks/figures.py`` (issue 55), not a rule.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parent.parent
MAX_MODULE_LINES = 500
MAX_CLASS_LINES = 300
NAMED_IN_THE_DESIGN = {
    "engine",
    "criteria",
    "gates",
    "audit",
    "converge",
    "benchmarks",
    "examples",
    "tests",
}
DYNAMIC_IMPORTS = {"import_module", "__import__"}


def _hidden(path: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in path.relative_to(root).parts)


def _packages(root: Path) -> list[str]:
    """The top-level directories of ``root`` holding ``.py`` files, hidden ones aside."""
    return sorted(
        d.name
        for d in root.iterdir()
        if d.is_dir()
        and not _hidden(d, root)
        and any(not _hidden(p, root) for p in d.rglob("*.py"))
    )


def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules(root: Path, packages: list[str] | None = None) -> dict[str, Path]:
    """Every module of ``packages`` (default: all of ``root``'s) → its file."""
    found: dict[str, Path] = {}
    for package in _packages(root) if packages is None else packages:
        for path in sorted((root / package).rglob("*.py")):
            if not _hidden(path, root):
                found[_module_name(path, root)] = path
    return found


def _dynamic_target(node: ast.Call) -> str | None:
    """The module of ``importlib.import_module("x.y")`` or ``__import__("x.y")``."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if name not in DYNAMIC_IMPORTS or not node.args:
        return None
    first = node.args[0]
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        return first.value
    return None


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
        elif isinstance(node, ast.Call) and (dynamic := _dynamic_target(node)) is not None:
            targets = [dynamic]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def _import_graph(modules: Mapping[str, Path]) -> nx.DiGraph:
    known = set(modules)
    graph: nx.DiGraph = nx.DiGraph()
    for name, path in modules.items():
        graph.add_node(name)
        for target in _imports(path, name, known):
            graph.add_edge(name, target)
    return graph


def _import_cycles(modules: Mapping[str, Path]) -> list[list[str]]:
    return list(nx.simple_cycles(_import_graph(modules)))


def _long_modules(modules: Mapping[str, Path], limit: int = MAX_MODULE_LINES) -> dict[str, int]:
    """Each module over ``limit`` lines → its line count."""
    sizes = {n: len(p.read_text(encoding="utf-8").splitlines()) for n, p in modules.items()}
    return {n: s for n, s in sizes.items() if s > limit}


def _long_classes(modules: Mapping[str, Path], limit: int = MAX_CLASS_LINES) -> dict[str, int]:
    """Each class (nested ones too) over ``limit`` lines → its length, as ``module.Class``."""
    out: dict[str, int] = {}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                length = node.end_lineno - node.lineno + 1
                if length > limit:
                    out[f"{name}.{node.name}"] = length
    return out


# -- no module reads another object's private attributes --------------------------------
PRIVATE_CHECKED = ("engine", "criteria", "gates", "audit", "converge")
"""The application packages whose modules touch no ``x._name`` of another object."""

LIBRARY_CONVENTIONS = {
    # SQLAlchemy's Row: ``_mapping`` is its documented dict view (the underscore keeps
    # it apart from the column names)
    "_mapping",
    # namedtuple's documented methods, underscored for the same reason
    "_replace",
    "_asdict",
    "_fields",
    "_make",
    # os._exit: the documented exit without cleanup (a worker past its grace period)
    "_exit",
}
"""Underscored attribute names that are a library's public API, on any receiver."""

ALLOWED_SITES = {
    # CPython's documented frame access: the caller's module, for an agent's reference
    ("converge/agents/suggestor.py", "sys._getframe"),
    # pydantic-ai has no public hook on the chat messages it sends; EndpointChatModel
    # overrides its one private method to send an assistant's ``content: null`` as "".
    ("converge/agents/endpoint.py", "super()._map_messages"),
    # typer 0.29 builds a pydantic TypeAdapter per parameter on each call and has no
    # public hook to skip it (C1, docs/performance.md): defer_coercion swaps in its own
    # runtime parameter, and builds typer's on first need
    ("converge/cli/commands.py", "param._runtime_param"),
    ("converge/cli/commands.py", "built._coerce_value"),
}
"""(file, ``receiver._name``): the single sites allowed, each with its reason."""


def _private_reads(path: Path, root: Path) -> list[str]:
    """Each ``x._name`` (not a dunder) in ``path`` whose ``x`` is not ``self``/``cls``,
    as ``file:line: x._name``, minus the library conventions and allowed sites."""
    file = path.relative_to(root).as_posix()
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Attribute):
            continue
        name = node.attr
        if not name.startswith("_") or name.startswith("__") or name in LIBRARY_CONVENTIONS:
            continue
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            continue
        site = f"{ast.unparse(node.value)}.{name}"
        if (file, site) not in ALLOWED_SITES:
            found.append(f"{file}:{node.lineno}: {site}")
    return found


# -- no module writes the run's parts from outside --------------------------------------
RUN_PARTS = ("cursor", "spend", "gating", "integrity", "recovery")
"""The run's parts (engine/_cycle/run.py): each changes only through its own verbs."""

RUN_MODULE = "engine/_cycle/run.py"
RUN_ATTRIBUTES = (
    "budget",
    "context",
    "cursor",
    "events",
    "facts",
    "gating",
    "integrity",
    "recovery",
    "run_id",
    "spend",
)
"""The attributes of a ``Run``, written by run.py only (its budget and events change
through its verbs)."""


def _written(node: ast.AST) -> list[ast.expr]:
    """The targets ``node`` assigns (``=``, ``+=``, an annotated ``=``) or deletes,
    tuples and starred targets unpacked."""
    if isinstance(node, ast.Assign | ast.Delete):
        targets = list(node.targets)
    elif isinstance(node, ast.AugAssign | ast.AnnAssign):
        targets = [node.target]
    else:
        return []
    out: list[ast.expr] = []
    while targets:
        t = targets.pop()
        if isinstance(t, ast.Tuple | ast.List):
            targets.extend(t.elts)
        elif isinstance(t, ast.Starred):
            targets.append(t.value)
        else:
            out.append(t)
    return out


def _attribute_writes(path: Path, root: Path) -> list[tuple[ast.Attribute, str]]:
    """Each write (``=``, ``+=``, ``del``) in ``path`` to an attribute (``x.y``), with
    where it stands, ``file:line: x.y``."""
    file = path.relative_to(root).as_posix()
    return [
        (target, f"{file}:{target.lineno}: {ast.unparse(target)}")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        for target in _written(node)
        if isinstance(target, ast.Attribute)
    ]


def _outside_writes(path: Path, root: Path) -> list[str]:
    """Each write in ``path`` to an attribute of another object (``x.y`` whose ``x`` is
    not ``self``/``cls``), as ``file:line: x.y``."""
    return [
        where
        for target, where in _attribute_writes(path, root)
        if not (isinstance(target.value, ast.Name) and target.value.id in ("self", "cls"))
    ]


def _writes_to_the_run(path: Path, root: Path) -> list[str]:
    """The :func:`_outside_writes` of ``path`` that change a run: an attribute of one of
    its parts (``<anything>.cursor.x``, ``.spend.x``, ...), or outside run.py an
    attribute of a ``Run`` (``run.x``, ``<anything>.run.x``)."""
    outside_run_py = path.relative_to(root).as_posix() != RUN_MODULE
    found = []
    for target, where in _attribute_writes(path, root):
        owner = target.value
        of_part = isinstance(owner, ast.Attribute) and owner.attr in RUN_PARTS
        of_run = (
            outside_run_py
            and target.attr in RUN_ATTRIBUTES
            and (
                (isinstance(owner, ast.Name) and owner.id == "run")
                or (isinstance(owner, ast.Attribute) and owner.attr == "run")
            )
        )
        if of_part or of_run:
            found.append(where)
    return found


PACKAGES = _packages(ROOT)


# -- the real tree ---------------------------------------------------------------------
def test_every_package_named_in_the_design_is_found_and_checked() -> None:
    assert set(PACKAGES) >= NAMED_IN_THE_DESIGN


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_is_over_500_lines(package: str) -> None:
    assert _long_modules(_modules(ROOT, [package])) == {}


@pytest.mark.parametrize("package", PACKAGES)
def test_no_class_is_over_300_lines(package: str) -> None:
    assert _long_classes(_modules(ROOT, [package])) == {}


def test_no_two_modules_import_each_other_directly_or_through_others() -> None:
    cycles = _import_cycles(_modules(ROOT))
    assert cycles == [], f"import cycles: {cycles[:5]}"


def test_the_engine_imports_none_of_the_packages_built_on_it() -> None:
    graph = _import_graph(_modules(ROOT))
    outward = sorted(
        (a, b)
        for a, b in graph.edges
        if a.split(".")[0] == "engine" and b.split(".")[0] != "engine"
    )
    assert outward == []


def test_the_engine_class_is_a_facade_under_300_lines() -> None:
    tree = ast.parse((ROOT / "engine" / "engine.py").read_text(encoding="utf-8"))
    engine = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Engine")
    assert engine.end_lineno is not None
    assert engine.end_lineno - engine.lineno + 1 < MAX_CLASS_LINES


def _found_in_checked_modules(check: Callable[[Path, Path], list[str]]) -> list[str]:
    """What ``check(path, ROOT)`` finds in each module of :data:`PRIVATE_CHECKED`."""
    return [
        found
        for path in sorted(p for pkg in PRIVATE_CHECKED for p in (ROOT / pkg).rglob("*.py"))
        for found in check(path, ROOT)
    ]


def test_no_module_reads_another_objects_private_attributes() -> None:
    found = _found_in_checked_modules(_private_reads)
    assert found == [], "private attributes read from outside their object:\n" + "\n".join(found)


def test_no_module_writes_the_runs_parts_from_outside() -> None:
    # the general rule (no write to another object's attribute) would flag ~50 sites
    # of audit/ and converge/ that are fine (FastAPI's app.state, a click parameter's
    # metavar, a row being built); the run is where outside writes had crept in
    found = _found_in_checked_modules(_writes_to_the_run)
    assert found == [], "the run's parts written from outside their verbs:\n" + "\n".join(found)


# -- the checks can fail ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("source", "known", "hidden"),
    [
        pytest.param(
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from engine.engine import Engine\n"
            "def f():\n    import audit\n    from gates.policies import x\n"
            "    from . import stop\n",
            {"engine", "engine.engine", "engine.stop", "engine.probe", "audit", "gates.policies"},
            {"engine.engine", "audit", "gates.policies", "engine.stop"},
            id="lazy-and-type-checking",
        ),
        pytest.param(
            "import importlib\n"
            "RUN = lambda: importlib.import_module('gates.policies').x\n"
            "def f(name):\n    importlib.import_module(name)\n    return __import__('audit')\n",
            {"engine.probe", "audit", "gates.policies"},
            {"gates.policies", "audit"},
            id="importlib",
        ),
    ],
)
def test_the_import_walk_sees_hidden_imports(
    tmp_path: Path, source: str, known: set[str], hidden: set[str]
) -> None:
    # the checks above are only worth trusting if the walk finds hidden imports
    probe = tmp_path / "probe.py"
    probe.write_text(source, encoding="utf-8")
    assert _imports(probe, "engine.probe", known) == hidden


def _package(root: Path, name: str, files: Mapping[str, str]) -> dict[str, Path]:
    """A package ``name`` under ``root`` with ``files``; its modules as the checks see them."""
    (root / name).mkdir()
    (root / name / "__init__.py").write_text("", encoding="utf-8")
    for file, text in files.items():
        (root / name / file).write_text(text, encoding="utf-8")
    return _modules(root)


def test_a_module_over_500_lines_is_reported(tmp_path: Path) -> None:
    body = "".join(f"X{i} = {i}\n" for i in range(MAX_MODULE_LINES))
    modules = _package(tmp_path, "pkg", {"at_limit.py": body, "over.py": body + "Y = 0\n"})
    assert _long_modules(modules) == {"pkg.over": MAX_MODULE_LINES + 1}


def test_a_class_over_300_lines_is_reported(tmp_path: Path) -> None:
    def cls(name: str, lines: int) -> str:
        # the class statement plus ``lines - 1`` lines of body
        return f"class {name}:\n" + "".join(f"    a{i} = {i}\n" for i in range(lines - 1))

    text = cls("AtLimit", MAX_CLASS_LINES) + cls("Over", MAX_CLASS_LINES + 1)
    text += "def f():\n" + textwrap.indent(cls("Nested", MAX_CLASS_LINES + 1), "    ")
    modules = _package(tmp_path, "pkg", {"big.py": text})
    assert _long_modules(modules) != {}  # the same file is also a long module
    assert _long_classes(modules) == {
        "pkg.big.Over": MAX_CLASS_LINES + 1,
        "pkg.big.Nested": MAX_CLASS_LINES + 1,
    }


def test_an_import_cycle_through_importlib_is_reported(tmp_path: Path) -> None:
    # the shape of the old benchmarks circle: the suite loaded a workload by name,
    # and the workload imported the suite back for its helpers
    modules = _package(
        tmp_path,
        "bench",
        {
            "suite.py": "import importlib\n"
            "RUNNERS = {'w4': lambda s: importlib.import_module('bench.agents').run(s)}\n",
            "agents.py": "def run(suite):\n    from bench.suite import RUNNERS\n",
            "harness.py": "X = 1\n",
        },
    )
    assert _packages(tmp_path) == ["bench"]
    assert [sorted(c) for c in _import_cycles(modules)] == [["bench.agents", "bench.suite"]]


def test_a_read_of_another_objects_private_attribute_is_reported(tmp_path: Path) -> None:
    (tmp_path / "probe.py").write_text(
        "import sys\n"
        "class C:\n"
        "    def f(self, store, row):\n"
        "        self._own = store._tx()\n"
        "        store.inner._key = row._mapping\n"
        "        return sys._getframe, self.__dict__, C()._made\n",
        encoding="utf-8",
    )
    # self's own, a dunder, a Row's ``_mapping`` pass; the rest is named
    assert sorted(_private_reads(tmp_path / "probe.py", tmp_path)) == [
        "probe.py:4: store._tx",
        "probe.py:5: store.inner._key",
        "probe.py:6: C()._made",
        "probe.py:6: sys._getframe",
    ]


def test_a_write_to_the_runs_parts_from_outside_is_reported(tmp_path: Path) -> None:
    (tmp_path / "engine" / "_cycle").mkdir(parents=True)
    probe = tmp_path / "probe.py"
    probe.write_text(
        "class C:\n"
        "    def f(self, run, leg, ctx):\n"
        "        self.cycle = run.cursor.cycle\n"
        "        run.cursor.cycle = 1\n"
        "        run.spend.invocations += 1\n"
        "        del run.gating.pending_gate\n"
        "        leg.run.integrity.leaves, x = [], 0\n"
        "        run.budget = None\n"
        "        leg.run.events = []\n"
        "        ctx.cycle = 2\n"
        "        run.cursor.merge_effects.append(1)\n",
        encoding="utf-8",
    )
    to_the_run = [
        "probe.py:4: run.cursor.cycle",
        "probe.py:5: run.spend.invocations",
        "probe.py:6: run.gating.pending_gate",
        "probe.py:7: leg.run.integrity.leaves",
        "probe.py:8: run.budget",
        "probe.py:9: leg.run.events",
    ]
    # self's own and a method call pass; every outside write is named, and the run's
    assert _outside_writes(probe, tmp_path) == [*to_the_run, "probe.py:10: ctx.cycle"]
    assert _writes_to_the_run(probe, tmp_path) == to_the_run
    run_module = tmp_path / "engine" / "_cycle" / "run.py"
    run_module.write_text("def of(run):\n    run.budget = None\n", encoding="utf-8")
    assert _writes_to_the_run(run_module, tmp_path) == []  # run.py builds its runs
