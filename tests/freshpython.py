"""``converge`` and Python snippets in a fresh interpreter, for the tests of what a
command imports (C1, issue 58) and of what a missing extra prints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def python_c(script: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -c SCRIPT`` in the project's folder, its output captured as text
    (120 s at most); ``env``: variables over this process's."""
    return subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env} if env else None,
    )


@dataclass(frozen=True)
class Ran:
    """What ``converge ARGS`` did in a fresh interpreter: what it printed, its exit
    code, the modules it had imported when it ended, its stderr."""

    printed: str
    code: int
    modules: set[str]
    stderr: str


def converge_fresh(args: list[str], env: dict[str, str] | None = None) -> Ran:
    """Run the console script's ``main`` on ``args`` in a fresh interpreter."""
    script = (
        "import json, sys\n"
        "from converge.cli import main\n"
        f"sys.argv = ['converge', *{args!r}]\n"
        "code = 0\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as done:\n"
        "    code = done.code or 0\n"
        "sys.stdout = sys.__stdout__\n"
        "print('\\n' + json.dumps([code, sorted(sys.modules)]))\n"
    )
    res = python_c(script, env)
    printed, _, tail = res.stdout.rpartition("\n[")
    code, modules = json.loads("[" + tail)
    return Ran(printed, code, set(modules), res.stderr)
