"""The README's two first commands work on a fresh clone.

`make test` is proven by CI itself (``.ci/run`` calls exactly it on a fresh
clone); this test proves `make demo` the same way: it clones the committed
repository and runs the command there, bootstrapping a new virtualenv.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.realserve import captured

ROOT = Path(__file__).resolve().parent.parent


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```bash\n(.*?)```", text, re.S)
    assert block, "the README starts with a bash block"
    commands = [line.split("#")[0].strip() for line in block.group(1).splitlines()]
    return [c for c in commands if c]  # comment lines continue the command above


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
    modules = "('llama_cpp', 'pydantic_ai', 'fastapi')"
    find = f"import importlib.util as u; print([m for m in {modules} if u.find_spec(m)])"
    python = clone / ".venv" / "bin" / "python"
    found = subprocess.run([str(python), "-c", find], capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "[]", "make demo installs no extra it does not need"


def make_dry_run(target: str, venv: Path) -> list[str]:
    """The ``pip install`` lines ``make -n TARGET`` would run with ``VENV=venv``."""
    proc = subprocess.run(
        ["make", "-n", f"VENV={venv}", target], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return [line for line in proc.stdout.splitlines() if "pip install --quiet -e" in line]


def extras_of(line: str) -> set[str]:
    found = re.search(r'"\.\[([^]]*)\]"', line)
    assert found, line
    return set(found.group(1).split(","))


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_each_make_target_installs_its_extras_and_the_demo_never_builds_the_local_model(
    tmp_path: Path,
) -> None:
    venv = tmp_path / "venv"
    (demo,) = make_dry_run("demo", venv)
    assert extras_of(demo) == {"examples"}
    (llm,) = make_dry_run("demo-llm", venv)
    assert extras_of(llm) == {"examples", "agents", "local"}
    (test,) = make_dry_run("test", venv)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert extras_of(test) == set(project["optional-dependencies"])
    # after make demo, make demo installs nothing more and make test still installs every extra
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").touch()
    (venv / ".installed-demo").touch()
    assert make_dry_run("demo", venv) == []
    assert make_dry_run("test", venv) == [test]
    # make test marks the demos' sets installed too
    dry = subprocess.run(
        ["make", "-n", f"VENV={venv}", "test"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    touched = [line.split()[1:] for line in dry.stdout.splitlines() if line.startswith("touch ")]
    assert touched == [[f"{venv}/.installed", f"{venv}/.installed-llm", f"{venv}/.installed-demo"]]


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


TOUR_AFTER_A_RUN = ("fork", "diff", "replay", "keys", "export", "verify-bundle")
"""The tour's commands run by :func:`test_the_tours_time_travel_and_proof_commands_work`."""


def test_the_tours_time_travel_and_proof_commands_work(tmp_path: Path) -> None:
    """The README's fork, diff, replay, keys, export and verify-bundle lines, as
    written (RUN: the oscillator's run, FORK: its fork), through the real command."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVERGE_")}
    env["PYTHONPATH"] = str(ROOT)

    def converge(*args: str) -> subprocess.CompletedProcess[str]:
        return captured([sys.executable, "-m", "converge.cli", *args], cwd=tmp_path, env=env)

    def newest() -> str:
        runs = json.loads(converge("runs", "--json").stdout)
        return str(runs[0]["run_id"])

    assert converge("run", str(ROOT / "examples" / "oscillator" / "job.yaml")).returncode == 3
    names = {"RUN": newest()}
    text = (ROOT / "README.md").read_text()
    lines = [
        line.split("#")[0].strip()
        for block in re.findall(r"```bash\n(.*?)```", text, re.S)
        for line in block.splitlines()
    ]
    tour = [c for c in lines if c.startswith("converge ") and c.split()[1] in TOUR_AFTER_A_RUN]
    assert [c.split()[1] for c in tour] == list(TOUR_AFTER_A_RUN)
    for command in tour:
        words = [names.get(w, w) for w in command.split()[1:]]
        proc = converge(*words)
        # a fork exits with its stop's code: the oscillator's cycle budget again
        assert proc.returncode == (3 if words[0] == "fork" else 0), (
            command,
            proc.stdout[-2000:],
            proc.stderr[-2000:],
        )
        if words[0] == "fork":
            names["FORK"] = newest()
    assert (tmp_path / "run.json").is_file() and (tmp_path / "keys" / "converge.pub").is_file()
