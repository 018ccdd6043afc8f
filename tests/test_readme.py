"""The README's two first commands work on a fresh clone.

`make test` is proven by CI itself (``.ci/run`` calls exactly it on a fresh
clone); this test proves `make demo` the same way: it clones the committed
repository and runs the command there, bootstrapping a new virtualenv.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```bash\n(.*?)```", text, re.S)
    assert block, "the README starts with a bash block"
    return [line.split("#")[0].strip() for line in block.group(1).splitlines() if line.strip()]


def test_the_readme_starts_with_the_demo_and_test_commands() -> None:
    assert readme_commands()[:2] == ["make demo", "make test"]
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^make test$", ci, re.M), "CI runs exactly the README's test command"


@pytest.mark.skipif(
    shutil.which("git") is None or shutil.which("make") is None, reason="needs git and make"
)
def test_make_demo_works_on_a_fresh_clone(tmp_path: Path) -> None:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "CONVERGE_"))}
    env["PYTHON"] = sys.executable if sys.prefix == sys.base_prefix else _base_python()
    proc = subprocess.run(
        ["make", "demo"], cwd=clone, env=env, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "dependency-audit" in proc.stdout + proc.stderr
    assert (clone / "converge.db").exists(), "the demo records its run in the embedded SQLite store"


def _base_python() -> str:
    base = Path(sys.base_prefix) / "bin" / "python3"
    return str(base) if base.exists() else "python3"


def test_the_python_tour_prints_what_its_comments_say(capsys: pytest.CaptureFixture[str]) -> None:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```python\n(.*?)```", text, re.S)
    assert block, "the README has a python tour"
    code = block.group(1)
    exec(compile(code, "README.md", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    promised = [
        line.split("#", 1)[1].strip()
        for line in code.splitlines()
        if line.startswith("print(") and "#" in line and "every signal" not in line
    ]
    for claim in promised:
        assert any(claim == line.strip() for line in printed), (claim, printed)
