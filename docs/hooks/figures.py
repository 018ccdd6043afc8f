"""The architecture's sizes, printed for readers: ``python docs/hooks/figures.py``.

Rewrites the part of ``docs/architecture.md`` between :data:`BEGIN` and :data:`END`:
the two paths a reader follows (a decision from the inbox to the hand-off of its
resume, a resume of a paused run to its stop; :mod:`tests.pathwalks`), counted as
function stays and returns to a module already left, and the longest functions and
modules of the packages. These are figures, not bounds: the build checks the
architecture's rules (layers, rooms, faces, modules under 500 lines), and a reader
sees here how long the paths have grown (issue 55). Run it after a change to either
path; ``tests/test_architecture_doc.py`` checks that it still runs and what it prints.
"""

from __future__ import annotations

import ast
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
PAGE = ROOT / "docs" / "architecture.md"
PACKAGES = ("engine", "criteria", "gates", "audit", "converge")
BEGIN = "<!-- figures: printed by docs/hooks/figures.py -->"
END = "<!-- end of the figures -->"
LONGEST = 10


def _python_files() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def longest_functions(count: int = LONGEST) -> list[tuple[str, int]]:
    """The ``count`` longest functions or methods (nested ones too), from ``def`` to
    their last line, as (``path:name``, lines), longest first."""
    found: list[tuple[str, int]] = []
    for path in _python_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno:
                where = f"{path.relative_to(ROOT)}:{node.name}"
                found.append((where, node.end_lineno - node.lineno + 1))
    return sorted(found, key=lambda f: (-f[1], f[0]))[:count]


def longest_modules(count: int = 5) -> list[tuple[str, int]]:
    """The ``count`` longest modules as (path, lines), longest first."""
    sizes = [
        (str(p.relative_to(ROOT)), len(p.read_text(encoding="utf-8").splitlines()))
        for p in _python_files()
    ]
    return sorted(sizes, key=lambda s: (-s[1], s[0]))[:count]


def walks() -> dict[str, tuple[int, int]]:
    """Each followed path's name → (function stays, returns to a module left)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from audit import open_store
    from audit.people import add_token
    from tests.pathwalks import decision_path, resume_path, returns_of
    from tests.webfixtures import quorum_job, run_job

    with tempfile.TemporaryDirectory() as folder:
        store = open_store(str(Path(folder) / "decide.db"))
        try:
            run_job(quorum_job(1), store)
            gate_id = store.gates(pending=True)[0].gate_id
            decision, _ = decision_path(store, gate_id, add_token(store, "alice"))
        finally:
            store.close()
        resume, result = resume_path(Path(folder))
    assert result.stop_reason.kind == "converged", result.stop_reason
    return {
        "a decision from the inbox, to the hand-off of its resume": (
            len(decision),
            returns_of(decision),
        ),
        "a resume of a run paused at a gate, to its stop": (len(resume), returns_of(resume)),
    }


def render() -> str:
    """The figures part of the page, markers included."""
    lines = [BEGIN, "", "| path followed | function stays | returns to a module left |"]
    lines.append("|---|---|---|")
    for name, (stays, back) in walks().items():
        lines.append(f"| {name} | {stays} | {back} |")
    lines += ["", "| longest functions | lines |", "|---|---|"]
    lines += [f"| `{where}` | {size} |" for where, size in longest_functions()]
    lines += ["", "| longest modules | lines |", "|---|---|"]
    lines += [f"| `{where}` | {size} |" for where, size in longest_modules()]
    return "\n".join([*lines, "", END])


def rewrite(page: Path = PAGE) -> None:
    """Replace the figures part of ``page`` (appended, with a heading, when absent)."""
    text = page.read_text(encoding="utf-8")
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + render() + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n## Figures\n\n" + render() + "\n"
    page.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    rewrite()
    print(f"wrote the figures into {PAGE.relative_to(ROOT)}")
