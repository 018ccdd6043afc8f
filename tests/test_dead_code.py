"""No dead code in the application packages: vulture (its confidence 80 % and up:
unused imports, variables, arguments, unreachable code) reports nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHECKED = ("engine", "criteria", "gates", "audit", "converge")
MIN_CONFIDENCE = "80"


def _vulture(*paths: str | Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vulture", *map(str, paths), "--min-confidence", MIN_CONFIDENCE],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )


def test_vulture_finds_no_dead_code_in_the_application_packages() -> None:
    found = _vulture(*CHECKED)
    assert (found.returncode, found.stdout, found.stderr) == (0, "", "")


def test_dead_code_is_reported(tmp_path: Path) -> None:
    (tmp_path / "probe.py").write_text(
        "import os\n\ndef f(x):\n    return 1\n    print(x)\n", encoding="utf-8"
    )
    found = _vulture("probe.py", cwd=tmp_path)
    assert found.returncode != 0
    assert "unused import 'os'" in found.stdout
    assert "unreachable code" in found.stdout
