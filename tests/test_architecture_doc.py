"""docs/architecture.md follows the code: its picture of the packages and its line
per module are what docs/hooks/architecture.py draws from the tree (issue 39)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _drawer(script: str = "architecture") -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        f"{script}_drawer", ROOT / "docs" / "hooks" / f"{script}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_architecture_page_is_drawn_from_the_code_as_it_is() -> None:
    drawer = _drawer()
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert drawer.page_text(text) == text, "run: python docs/hooks/architecture.py"


def test_every_module_has_its_line_and_every_room_its_box() -> None:
    drawer = _drawer()
    table, picture = drawer.table(), drawer.picture()
    for package in ("engine", "criteria", "gates", "audit", "converge"):
        for path in (ROOT / package).rglob("*.py"):
            assert f"| `{path.relative_to(ROOT).as_posix()}` |" in table
    for room in ("audit.trail", "audit.ledger", "converge.timetravel", "engine._cycle"):
        assert f'["{room}"]' in picture


def test_a_page_without_its_markers_is_refused() -> None:
    with pytest.raises(ValueError, match="markers"):
        _drawer().page_text("# Architecture\n")


def test_a_stale_page_is_told_apart(tmp_path: Path) -> None:
    drawer = _drawer()
    stale = f"{drawer.BEGIN}\n| `engine/gone.py` | a module that is no more |\n{drawer.END}\n"
    assert drawer.page_text(stale) != stale


def test_the_figures_are_printed_for_readers_not_checked_as_bounds(tmp_path: Path) -> None:
    """docs/hooks/figures.py still runs: the two paths walked (each ends where it must:
    the decision handed over, the resume converged), the longest functions and modules
    listed longest first; the page holds its figures part."""
    figures = _drawer("figures")
    text = figures.render()
    assert text.startswith(figures.BEGIN) and text.endswith(figures.END)
    rows = [line for line in text.splitlines() if line.startswith("| a ")]
    assert len(rows) == 2 and all(int(r.split("|")[2]) > 5 for r in rows), rows
    sizes = [size for _, size in figures.longest_functions()]
    assert len(sizes) == figures.LONGEST and sizes == sorted(sizes, reverse=True)
    page = tmp_path / "architecture.md"
    page.write_text("# Architecture\n", encoding="utf-8")
    figures.rewrite(page)
    figures.rewrite(page)  # the part replaced, not appended twice
    assert page.read_text(encoding="utf-8").count(figures.BEGIN) == 1
    assert figures.BEGIN in (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
