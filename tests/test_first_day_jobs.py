"""What a new user meets with a first job (issue 32, items 1, 9, 10, 11 and 12): a
module named like converge's packages, job-file typos, a human value given from
another directory, the reviewed audit from another directory, the guide's
invariant, and the distribution's name."""

from __future__ import annotations

import importlib.metadata
import re
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic_ai.models.test import TestModel
from typer.testing import CliRunner

import converge
from audit import open_store
from converge.cli import app
from converge.jobs import FRAMEWORK_PACKAGES, load_job
from engine import Context, Proposal, suggestor
from examples.dependency_audit.reviewer import REVIEWER, reviewer_agent
from examples.dependency_audit.spdx import from_human
from tests.hitlfixtures import STORES, store_url_for
from tests.test_cli_examples import invoke
from tests.test_getting_started import blocks

ROOT = Path(__file__).resolve().parent.parent

CRITERION = '''"""A criterion, in a module named like one of converge's packages."""
from criteria import criterion
from engine import Context


@criterion(id="has_c")
def has_c(ctx: Context) -> bool:
    return ctx.count("c") > 0
'''

SUGGESTOR = '''"""The suggestor of the job."""
from engine import Context, Proposal, suggestor


@suggestor(name="make_{value}")
def make_c(ctx: Context) -> list[Proposal]:
    return [] if ctx.count("c") else [Proposal("c", "{value}")]
'''


@pytest.fixture
def fresh_imports(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``sys.path`` and the job modules as they were before the test."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name.startswith(("converge_job_", "firstday_", "suggestors")):
            del sys.modules[name]


def shadow_job(folder: Path, module: str, value: str = "c") -> Path:
    """A job whose criterion lives in ``module.py`` next to it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{module}.py").write_text(CRITERION)
    (folder / "suggestors.py").write_text(SUGGESTOR.format(value=value))
    job = folder / "job.yaml"
    job.write_text(f"name: shadow\ncriteria: [{module}:has_c]\nsuggestors: [suggestors:make_c]\n")
    return job


# -- item 1: a user module named like converge's packages ------------------------------------
@pytest.mark.parametrize("module", FRAMEWORK_PACKAGES)
def test_a_module_named_like_a_converge_package_next_to_the_job_runs(
    module: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_imports: None
) -> None:
    job = shadow_job(tmp_path / "job", module)
    monkeypatch.chdir(job.parent)
    code, data, err = invoke("run", "job.yaml", "--no-audit", "--json")
    assert code == 0, err
    assert data["stop_reason"]["kind"] == "criteria_met"
    assert sys.modules[module].__file__ != str(job.parent / f"{module}.py")  # not shadowed


def test_a_criteria_py_job_runs_from_another_directory_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_imports: None
) -> None:
    job = shadow_job(tmp_path / "job", "criteria")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    code, data, err = invoke("run", str(job), "--no-audit", "--json")
    assert code == 0, err
    assert data["stop_reason"]["kind"] == "criteria_met"


def test_two_jobs_with_modules_of_the_same_name_each_get_their_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_imports: None
) -> None:
    monkeypatch.chdir(tmp_path)
    for value in ("one", "two"):
        job = load_job(shadow_job(tmp_path / value, "criteria", value))
        result = job.build_engine().run({})
        assert [f.content for f in result.context.get("c")] == [value]


def test_importing_a_shadowed_name_from_a_job_module_names_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_imports: None
) -> None:
    job = shadow_job(tmp_path, "criteria")
    (tmp_path / "suggestors.py").write_text(
        "from criteria import has_c\n" + SUGGESTOR.format(value="c")
    )
    monkeypatch.chdir(tmp_path)
    code, _, err = invoke("run", str(job.name), "--no-audit")
    assert code == 2
    line = " ".join(err.split())
    assert "job.yaml:3: suggestors.0: cannot import module 'suggestors'" in line
    assert "criteria.py is named like converge's package 'criteria'" in line
    assert "rename criteria.py" in line


# -- item 9: job-file errors ----------------------------------------------------------------
def test_a_misspelt_key_is_shown_with_every_error_and_what_was_meant(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("job.yaml").write_text("name: x\nsuggestor: [reach:walk]\n")
    code, _, err = invoke("run", "job.yaml", "--no-audit")
    assert code == 2
    line = " ".join(err.split())
    assert "job.yaml:2: suggestor: unknown key 'suggestor' (did you mean 'suggestors'?)" in line
    assert "error: job.yaml:1: suggestors: required key missing" in line  # each at its line
    assert "more)" not in line and "Extra inputs" not in line


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "name: x\nsuggestors: [a:b]\nbudgit: {max_cycles: 3}\n",
            "job.yaml:3: budgit: unknown key 'budgit' (did you mean 'budget'?)",
        ),
        (
            "name: x\nsuggestors: [a:b]\ngates:\n  - hitl: {kyes: [a]}\n",
            "job.yaml:4: gates.0.hitl.kyes: unknown key 'kyes' (did you mean 'keys'?)",
        ),
        (
            "name: x\nsuggestors: [a:b]\nstop_conditions:\n  - type: loop_detection\n"
            "    windw: 3\n",
            "job.yaml:5: stop_conditions.0.windw: unknown key 'windw' (did you mean 'window'?) "
            "error: job.yaml:4: stop_conditions.0.window: required key missing",
        ),
        (
            "name: x\nsuggestors: [a:b]\ncolour: blue\n",
            "job.yaml:3: colour: unknown key 'colour' (known keys: name, description,",
        ),
    ],
)
def test_an_unknown_key_says_which_key_was_meant(
    text: str, expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("job.yaml").write_text(text)
    code, _, err = invoke("run", "job.yaml", "--no-audit")
    assert code == 2
    assert expected in " ".join(err.split())


# -- item 10: a human value given from another directory ------------------------------------
HOOKS = '''"""A job whose gate takes a human value, checked by a hook of this module."""
from criteria import criterion
from engine import Context, Proposal, suggestor


@suggestor(name="unknown")
def unknown(ctx: Context) -> list[Proposal]:
    return [] if ctx.count("x") else [Proposal("x", {{"name": "left-pad", "spdx": "?"}})]


def spdx_value(value: str, content: dict) -> dict:
    return {{**content, "spdx": value.upper(), "source": "human"}}


@criterion(id="classified")
def classified(ctx: Context) -> bool:
    return any(f.content.get("spdx") == "MIT" for f in ctx.get("x"))
'''


@pytest.mark.parametrize("kind", STORES)
def test_a_value_is_taken_from_another_directory_than_the_job_s(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_imports: None
) -> None:
    module = f"firstday_hooks_{kind}"
    folder = tmp_path / "job"
    folder.mkdir()
    (folder / f"{module}.py").write_text(HOOKS.format())
    (folder / "job.yaml").write_text(
        f"name: valued\nsuggestors: [{module}:unknown]\ncriteria: [{module}:classified]\n"
        f"gates: [{{hitl: {{keys: [x], validate_value: '{module}:spdx_value'}}}}]\n"
    )
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    path_before = list(sys.path)
    with store_url_for(kind, tmp_path) as url:
        code, data, err = invoke("run", str(folder / "job.yaml"), "--db", url, "--json")
        assert code == 10, err
        # `converge approve` is another process: nothing of the run is imported there
        sys.path[:] = path_before
        del sys.modules[module]
        gate = data["stop_reason"]["gate_id"]
        code, _, err = invoke("approve", gate, "--by", "carol", "--value", "mit", "--db", url)
        assert code == 0, err
        store = open_store(url)
        try:
            facts = [f.content for f in store.facts(data["run_id"])]
        finally:
            store.close()
    assert {"name": "left-pad", "spdx": "MIT", "source": "human"} in facts


# -- item 11: the reviewed audit from another directory, the guide's invariant ---------------
def test_the_reviewed_audit_reviews_from_another_directory_with_a_plausible_offline_guess(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_model_requests: None
) -> None:
    monkeypatch.setenv("CONVERGE_MODEL", "test")
    monkeypatch.chdir(tmp_path)
    job = ROOT / "examples" / "dependency_audit" / "reviewed.yaml"
    code, data, err = invoke("run", str(job), "--db", str(tmp_path / "runs.db"), "--json")
    assert code == 10, err
    reason = data["stop_reason"]
    assert reason["agent_id"] == REVIEWER  # the reviewer read the vendored LICENSE
    assert "Review: legacy-left-pad is MIT? (confidence 0.0)" in reason["summary"]


def test_the_offline_reviewer_answers_an_spdx_id(no_model_requests: None) -> None:
    verdict = reviewer_agent(TestModel()).run_sync("MIT License ...").output
    assert from_human(verdict.spdx) == verdict.spdx == "MIT"


def test_the_getting_started_job_has_an_invariant_that_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_imports: None
) -> None:
    for _, attrs, code in blocks(ROOT / "docs" / "getting-started.md"):
        if "title" in attrs:
            (tmp_path / attrs["title"]).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / attrs["title"]).write_text(code)
    monkeypatch.chdir(tmp_path / "triage")
    job = load_job("job.yaml")
    assert "@invariant(" in (tmp_path / "triage" / "suggestors.py").read_text()
    engine = job.build_engine()
    assert [i.name for i in engine.invariants] == ["one_label_per_issue"]
    assert job.build_engine().run(job.spec.initial).stop_reason.exit_code == 10  # holds

    @suggestor(name="second_opinion", dependencies=["issue"])
    def second_opinion(ctx: Context) -> list[Proposal]:
        return [Proposal("label", {"issue": f.content, "label": "docs"}) for f in ctx.get("issue")]

    engine.register(second_opinion)
    stop = engine.run({"issue": ["App crashes on start"]}).stop_reason
    assert stop.kind == "invariant_violated" and stop.exit_code == 4
    assert "one_label_per_issue" in str(stop)
    assert "labelled twice: App crashes on start" in str(stop)


# -- item 12: the distribution's name -------------------------------------------------------
def test_the_distribution_is_converge_engine_and_the_command_prints_its_version() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == "converge-engine"
    assert project["scripts"]["converge"] == "converge.cli:main"
    assert importlib.metadata.version("converge-engine") == converge.__version__
    res = CliRunner().invoke(app, ["--version"])
    assert res.exit_code == 0 and res.stdout.strip() == f"converge {converge.__version__}"


def test_every_install_hint_names_converge_engine() -> None:
    hint = re.compile(r"pip install ['\"]?converge[\[ '\"]")
    files = [
        ROOT / "README.md",
        *(ROOT / "docs").glob("*.md"),
        *(
            p
            for d in ("engine", "criteria", "gates", "audit", "converge")
            for p in (ROOT / d).rglob("*.py")
        ),
        *(ROOT / "examples").rglob("*.py"),
    ]
    wrong = [str(p.relative_to(ROOT)) for p in files if hint.search(p.read_text(encoding="utf-8"))]
    assert wrong == []
    assert (
        "pip install 'converge-engine[agents]'"
        in (ROOT / "converge/agents/__init__.py").read_text()
    )
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert "the distribution is `converge-engine`" in readme
    assert "The import packages are `engine`, `criteria`, `gates`, `audit` and `converge`" in readme
