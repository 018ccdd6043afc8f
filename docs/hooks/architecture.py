"""The packages of docs/architecture.md, drawn from the code.

``python docs/hooks/architecture.py`` rewrites the part of ``docs/architecture.md``
between :data:`BEGIN` and :data:`END`: a picture of the packages and their rooms
(the sub-packages of ``audit`` and ``converge``, and the engine's cycle) with the
imports between them, and one line per module, its path and the first line of its
docstring. ``tests/test_architecture_doc.py`` fails when the page is not what this
draws, so the page follows the code.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
PAGE = ROOT / "docs" / "architecture.md"
PACKAGES = ("engine", "criteria", "gates", "audit", "converge")
BEGIN = "<!-- packages and modules: drawn by docs/hooks/architecture.py -->"
END = "<!-- end of the drawn part -->"


def _modules() -> Iterator[tuple[str, Path]]:
    """Every module of the packages as (dotted name, file), in path order."""
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            yield name, path


def room(module: str) -> str:
    """The box a module is drawn in: its package, or the package's sub-package."""
    parts = module.split(".")
    if len(parts) > 2 or (len(parts) == 2 and (ROOT.joinpath(*parts) / "__init__.py").exists()):
        return ".".join(parts[:2])
    return parts[0]


def summary(path: Path) -> str:
    """The first line of the module's docstring (a face's: its package's), unwrapped."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    first = doc.split("\n\n")[0].replace("\n", " ").strip() or "—"
    return first.replace("|", "\\|")


def _edges() -> set[tuple[str, str]]:
    """The imports between rooms (a room's own imports aside)."""
    names = {name for name, _ in _modules()}
    edges: set[tuple[str, str]] = set()
    for name, path in _modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                target = node.module
            elif isinstance(node, ast.Import):
                target = node.names[0].name
            else:
                continue
            while target and target not in names:
                target = target.rpartition(".")[0]
            if target and room(target) != room(name):
                edges.add((room(name), room(target)))
    return edges


def picture() -> str:
    """A Mermaid flowchart of the rooms, each package a subgraph, and their imports."""
    rooms = sorted({room(name) for name, _ in _modules()})
    lines = ["```mermaid", "flowchart TD"]
    for package in PACKAGES:
        lines.append(f'    subgraph {package}_pkg ["{package}/"]')
        lines += [
            f'        {r.replace(".", "_")}["{r}"]' for r in rooms if r.split(".")[0] == package
        ]
        lines.append("    end")
    # package to package once, inside a package room to room
    drawn: set[tuple[str, str]] = set()
    for a, b in sorted(_edges()):
        pa, pb = a.split(".")[0], b.split(".")[0]
        edge = (a, b) if pa == pb else (f"{pa}_pkg", f"{pb}_pkg")
        if edge not in drawn:
            drawn.add(edge)
            lines.append(f"    {edge[0].replace('.', '_')} --> {edge[1].replace('.', '_')}")
    lines.append("```")
    return "\n".join(lines)


def table() -> str:
    """One line per module: its file and what it is."""
    lines = ["| module | what it is |", "|---|---|"]
    for _, path in _modules():
        lines.append(f"| `{path.relative_to(ROOT).as_posix()}` | {summary(path)} |")
    return "\n".join(lines)


def drawn() -> str:
    """The part of the page between the markers."""
    return f"{BEGIN}\n\n{picture()}\n\n{table()}\n\n{END}"


def page_text(text: str) -> str:
    """``text`` with the part between the markers drawn again. Raises ``ValueError``
    when a marker is missing."""
    if BEGIN not in text or END not in text:
        raise ValueError(f"{PAGE} lacks its markers {BEGIN!r} and {END!r}")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return head + drawn() + tail


def main() -> int:
    """Rewrite the page; exit 0."""
    PAGE.write_text(page_text(PAGE.read_text(encoding="utf-8")), encoding="utf-8")
    sys.stdout.write(f"drew {PAGE.relative_to(ROOT)}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
