"""docs/getting-started.md, executed from top to bottom in an empty directory.

Blocks tagged ``python title="PATH"`` or ``yaml title="PATH"`` (the site shows the
title above the block) are written to PATH;
``bash`` blocks run with ``bash -euo pipefail`` (``converge`` on PATH), other
``python`` blocks with this interpreter; each from the working directory, in the
page's order, and each must succeed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "getting-started.md"
BLOCK = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```$", re.M | re.S)


def blocks(path: Path) -> list[tuple[str, dict[str, str], str]]:
    """``(language, {attribute: value}, code)`` of every fenced block of ``path``."""
    out = []
    for lang, info, code in BLOCK.findall(path.read_text(encoding="utf-8")):
        attrs = {k: v.strip("\"'") for k, v in (a.split("=", 1) for a in info.split() if "=" in a)}
        out.append((lang, attrs, code))
    return out


def test_the_getting_started_guide_runs_end_to_end(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONVERGE_", "VIRTUAL_ENV"))}
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    # the guide's modules come from its own directory, converge's from the checkout
    env["PYTHONPATH"] = str(ROOT)
    ran = {"bash": 0, "python": 0, "file": 0}
    for lang, attrs, code in blocks(GUIDE):
        if "title" in attrs:
            target = tmp_path / attrs["title"]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(code, encoding="utf-8")
            ran["file"] += 1
            continue
        if lang == "bash":
            cmd = ["bash", "-euo", "pipefail", "-c", code]
        elif lang == "python":
            cmd = [sys.executable, "-c", code]
        else:
            continue
        proc = subprocess.run(
            cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 0, f"{lang} block failed:\n{code}\n{proc.stdout}\n{proc.stderr}"
        ran[lang] += 1
        if lang == "python":
            assert "criteria met: all_labelled" in proc.stdout
            assert "['bug', 'performance', 'needs-triage']" in proc.stdout
    assert ran == {"bash": 3, "python": 1, "file": 2}
    assert (tmp_path / "triage" / "converge.db").is_file()


@pytest.mark.parametrize("path", [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"])
def test_docs_refer_only_to_files_in_the_repository(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    named = set(
        re.findall(
            r"`((?:docs|examples|tests|engine|criteria|gates|audit|converge|benchmarks)/[\w./-]+)`",
            text,
        )
    )
    missing = sorted(n for n in named if not (ROOT / n.rstrip("/")).exists() and "*" not in n)
    assert missing == [], f"{path.name} names files that are not in the repository"
    assert "DESIGN.md" not in text or (ROOT / "DESIGN.md").exists()


@pytest.mark.parametrize(
    "path", [p for p in sorted((ROOT / "docs").glob("*.md")) if p.name != "getting-started.md"]
)
def test_every_python_snippet_of_the_docs_runs(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page's Python blocks run in order in one namespace, in an empty directory."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CONVERGE_DB", raising=False)
    namespace: dict[str, object] = {"__name__": f"docs_{path.stem.replace('-', '_')}"}
    for lang, attrs, code in blocks(path):
        if lang == "python" and "title" not in attrs:
            exec(compile(code, f"{path.name}:snippet", "exec"), namespace)
