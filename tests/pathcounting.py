"""Counting a path through the code: the functions it stays in, the modules it
returns to (tests/test_resume_path.py, tests/test_decision_path.py)."""

from __future__ import annotations

from types import CodeType


def returns_of(path: list[CodeType]) -> int:
    """How many times ``path`` moves into a module it had already left."""
    left: set[str] = set()
    here: str | None = None
    back = 0
    for code in path:
        module = code.co_filename
        if module != here:
            back += module in left
            if here is not None:
                left.add(here)
            here = module
    return back


def describe(path: list[CodeType], root: str) -> str:
    """One line per stay: its file under ``root`` and its function's name."""
    start = len(root.rstrip("/")) + 1
    return "\n".join(f"  {c.co_filename[start:]}:{c.co_name}" for c in path)


def code(name: str, module: str) -> CodeType:
    """A code object named ``name`` in file ``module``, to test a counter with."""
    return compile("pass", module, "exec").replace(co_name=name)
