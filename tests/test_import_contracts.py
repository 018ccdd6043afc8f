"""The package layering of DESIGN.md §2 is checked by import-linter, and can fail.

``lint-imports`` reads the contracts in ``pyproject.toml``: imports point down
(``converge`` → ``criteria | gates | audit`` → ``engine``), the three middle
packages do not import each other, and the engine uses no application library.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.realserve import captured

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("engine", "criteria", "gates", "audit", "converge")
LAYERS = "Imports point down: converge -> criteria | gates | audit -> engine"


def lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    """The venv's ``lint-imports`` on the tree at ``cwd`` (which is what gets analysed)."""
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    return captured(
        [str(Path(sys.executable).parent / "lint-imports"), "--no-cache"], cwd=cwd, env=env
    )


def test_the_import_contracts_are_kept() -> None:
    proc = lint_imports(ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout


def test_an_engine_module_importing_audit_breaks_the_layers_contract(tmp_path: Path) -> None:
    for package in PACKAGES:
        shutil.copytree(
            ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    module = tmp_path / "engine" / "facts.py"
    with module.open("a", encoding="utf-8") as f:
        f.write("\n\ndef _reaches_up() -> object:\n    import audit\n\n    return audit\n")

    proc = lint_imports(tmp_path)

    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert f"{LAYERS} BROKEN" in proc.stdout, proc.stdout
    assert "engine.facts -> audit" in proc.stdout, proc.stdout
