"""Product code speaks the product's words: no benchmark ids (W2, R1...) in engine,
criteria, gates, audit or converge; those are docs/performance.md's (issue 39)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("engine", "criteria", "gates", "audit", "converge")


# -- product code names no benchmark -------------------------------------------------
BENCHMARK_ID = re.compile(r"\b(?:W[1-9]|R1|Q1|S1|F1)\b")
"""The ids of docs/performance.md's workloads: the benchmarks' words, not the product's."""


def _benchmark_ids(paths: list[Path], root: Path) -> list[str]:
    return [
        f"{p.relative_to(root).as_posix()}:{n}: {line.strip()}"
        for p in paths
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if BENCHMARK_ID.search(line)
    ]


def test_no_product_module_names_a_benchmark_by_its_id() -> None:
    paths = sorted(p for pkg in PRODUCT for p in (ROOT / pkg).rglob("*.py"))
    assert _benchmark_ids(paths, ROOT) == []


def test_a_benchmark_id_in_a_docstring_is_reported(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text('"""Fast on W2 (docs/performance.md)."""\nWIDTH = 2\n', encoding="utf-8")
    assert _benchmark_ids([probe], tmp_path) == [
        'probe.py:1: """Fast on W2 (docs/performance.md)."""'
    ]
