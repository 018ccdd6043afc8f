"""The documentation site (mkdocs.yml): it builds with --strict, its API pages list every
public name with its docstring, its job-file reference has a row per key of the JSON
Schema, and the job-files page's examples and error messages are those of converge."""

from __future__ import annotations

import dataclasses
import html
import importlib
import importlib.util
import inspect
import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

import pytest
from typer.testing import CliRunner

from converge.cli import app
from converge.cli.schema import job_file_schema
from converge.jobs import JobSpec, load_job, parse_job

pytest.importorskip("mkdocs", reason="needs the docs extra")


ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "job-files.md"
runner = CliRunner()


def _hook(name: str) -> ModuleType:
    """A hook of docs/hooks/, imported as mkdocs does (by path)."""
    spec = importlib.util.spec_from_file_location(f"docs_hook_{name}", ROOT / "docs/hooks" / name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


docstrings = _hook("docstrings.py")
job_reference = _hook("job_reference.py")
rst = _hook("griffe_rst.py")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built once for this module with ``mkdocs build --strict``."""
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-5000:]
    return out


def _text(fragment: str) -> str:
    """Visible text of an HTML fragment, whitespace collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


def _plain(markdown: str) -> str:
    """A docstring line as the page shows it: roles, code and emphasis marks gone."""
    return " ".join(re.sub(r"[`*]", " ", rst.markdown(markdown)).split())


def _section(page: str, anchor: str) -> str:
    """The HTML from the heading ``id=anchor`` to the next heading."""
    start = page.index(f'id="{anchor}"')
    end = re.compile(r"<h[1-6][ >]").search(page, start)
    return page[start : end.start() if end else len(page)]


# --- the API pages ---------------------------------------------------------------


def _documented() -> list[tuple[str, str, Any]]:
    """``(module, name, object)`` of every name the API pages must show."""
    modules = [importlib.import_module(name) for name in docstrings.MODULES]
    return [(m.__name__, name, getattr(m, name)) for m in modules for name in m.__all__]


def test_the_api_pages_cover_the_five_packages() -> None:
    assert {"engine", "criteria", "gates", "audit", "converge"} <= set(docstrings.MODULES)
    names = {f"{m}.{n}" for m, n, _ in _documented()}
    assert {"engine.Engine", "criteria.KeyPresent", "gates.require_approval"} <= names
    assert {"audit.open_store", "converge.__version__", "converge.jobs.load_job"} <= names


def test_the_api_pages_list_every_public_name_with_its_docstring(site: Path) -> None:
    for module, name, obj in _documented():
        page = (site / "api" / module.split(".")[0] / "index.html").read_text(encoding="utf-8")
        # a name shadowed by a submodule of the same name (engine.suggestor, the
        # decorator) is rendered under the path where it is defined
        defined = f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', '')}"
        anchor = next((a for a in (f"{module}.{name}", defined) if f'id="{a}"' in page), None)
        assert anchor is not None, f"{module}.{name} is not on the API page of {module}"
        if inspect.isclass(obj) or inspect.isfunction(obj):
            first = inspect.cleandoc(obj.__doc__ or "").splitlines()[0]
            assert _plain(first) in _plain(_text(_section(page, anchor))), (module, name, first)


def test_a_missing_docstring_is_reported_by_the_hook() -> None:
    module = ModuleType("synthetic")

    def documented() -> None:
        """Has one."""

    def undocumented() -> None:
        pass

    class Concrete:
        """Documented, but one method is not."""

        def fine(self) -> None:
            """Has one."""

        def bare(self) -> None:
            pass

        @property
        def bare_property(self) -> int:
            return 1

        def _private(self) -> None:
            pass

    class Shape(Protocol):
        """Protocol members are described by the protocol."""

        def area(self) -> float: ...

    @dataclasses.dataclass
    class Record:
        value: int

    module.__dict__.update(
        documented=documented,
        undocumented=undocumented,
        Concrete=Concrete,
        Shape=Shape,
        Record=Record,
        CONSTANT=3,
        __all__=["documented", "undocumented", "Concrete", "Shape", "Record", "CONSTANT"],
    )
    assert docstrings.missing_docstrings(module) == [
        "synthetic.undocumented",
        "synthetic.Concrete.bare",
        "synthetic.Concrete.bare_property",
        "synthetic.Record",
    ]
    assert docstrings.missing_docstrings(module, ("documented", "Shape")) == []


def test_every_documented_name_has_a_docstring() -> None:
    missing = [
        path
        for module in docstrings.MODULES
        for path in docstrings.missing_docstrings(importlib.import_module(module))
    ]
    assert missing == []


def test_a_public_function_without_a_docstring_fails_the_strict_build(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from mkdocs.commands.build import build
    from mkdocs.config import load_config
    from mkdocs.exceptions import Abort

    import engine

    name = next(n for n in engine.__all__ if inspect.isfunction(getattr(engine, n)))

    def undocumented() -> None:
        pass

    monkeypatch.setattr(engine, name, undocumented)
    monkeypatch.chdir(ROOT)
    config = load_config(str(ROOT / "mkdocs.yml"), strict=True, site_dir=str(tmp_path / "site"))
    with caplog.at_level(logging.WARNING), pytest.raises(Abort, match="strict mode"):
        build(config)
    assert f"missing docstring: engine.{name} " in caplog.text


# --- the job-file reference ------------------------------------------------------


def _models(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every model of the schema: the top level, and each of ``$defs``."""
    return {"top level": schema, **schema["$defs"]}


def test_the_job_files_page_has_a_row_for_every_key_of_the_schema(site: Path) -> None:
    page = (site / "job-files" / "index.html").read_text(encoding="utf-8")
    sections = re.split(r"(?=<h3 )", page.split('id="every-key"', 1)[1])
    tables = {}
    for section in sections:
        model = re.search(r"Model: <code>(\w+)</code>", section)
        name = model.group(1) if model else "top level" if 'id="top-level"' in section else None
        if name is not None:
            tables[name] = {
                row[0]: row[-1]
                for row in (
                    [_text(cell) for cell in re.findall(r"<td>(.*?)</td>", tr, re.S)]
                    for tr in re.findall(r"<tr>(.*?)</tr>", section, re.S)
                )
                if row
            }
    models = _models(job_file_schema())
    assert set(tables) == set(models)
    for name, model in models.items():
        assert set(tables[name]) == set(model["properties"]), name
        for key, prop in model["properties"].items():
            assert _plain(tables[name][key]) == _plain(prop["description"]), (name, key)


def test_every_key_of_the_schema_has_a_description() -> None:
    _, undescribed = job_reference.reference(job_file_schema())
    assert undescribed == [], "add Field(description=...) to these keys' models"


def test_the_reference_renders_types_defaults_and_reports_undescribed_keys() -> None:
    schema = {
        "title": "job",
        "required": ["name"],
        "properties": {
            "name": {"type": "string", "description": "The name."},
            "mode": {"enum": ["a", "b"], "default": "a", "description": "`a|b`, or | not."},
            "items": {"type": "array", "items": {"$ref": "#/$defs/Item"}},
        },
        "$defs": {
            "Item": {
                "properties": {
                    "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None}
                }
            }
        },
    }
    tables, undescribed = job_reference.reference(schema)
    assert undescribed == ["items (top level)", "items[].limit (Item)"]
    assert "| `name` | `str` | **required** | The name. |" in tables
    assert '| `mode` | `"a" | "b"` | `"a"` | `a|b`, or \\| not. |' in tables
    assert "| `items` | `list[Item]` | `[]` |  |" in tables
    assert "### `items[]` { #items }" in tables
    assert "| `limit` | `int | null` | `null` |  |" in tables


def test_the_example_job_of_the_page_is_valid_and_builds() -> None:
    example = re.search(r"```yaml\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)
    assert example is not None
    job = parse_job(example.group(1), "docs/job-files.md")
    job.build_engine()
    assert job.spec.report[0].columns == ["name", "spdx", "source"]


def test_the_error_messages_shown_are_those_converge_prints(tmp_path: Path) -> None:
    shown = re.findall(r"^error: job\.yaml:(.*)$", PAGE.read_text(encoding="utf-8"), re.M)
    jobs = [
        "name: x\nsuggestors: [tests.jobfixtures:tick]\n"
        "criteria: [tests.jobfixtures:NOT_A_CRITERION]\n",
        "name: x\nsuggestors: [tests.jobfixtures:tick]\nbudget: {max_cycles: many}\n",
    ]
    assert len(shown) == len(jobs)
    for text, expected in zip(jobs, shown, strict=True):
        path = tmp_path / "job.yaml"
        path.write_text(text)
        res = runner.invoke(app, ["run", str(path), "--no-audit"], terminal_width=300)
        assert res.exit_code == 2
        assert res.stderr.strip() == f"error: {path}:{expected}"


def test_converge_schema_describes_every_key_and_forbids_unknown_ones(tmp_path: Path) -> None:
    out = tmp_path / "job-file.schema.json"
    res = runner.invoke(app, ["schema", "--output", str(out)])
    assert res.exit_code == 0
    schema = json.loads(out.read_text())
    assert schema == job_file_schema()
    assert schema["$schema"].startswith("https://json-schema.org/draft/2020-12")
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) == {"name", "suggestors"}
    spec_keys = {info.alias or name for name, info in JobSpec.model_fields.items()}
    assert set(schema["properties"]) == spec_keys
    gate = schema["$defs"]["GateSpec"]["properties"]
    assert "schema" in gate and "schema_" not in gate  # as written in YAML
    # every key the example job files use is in the schema
    for job in sorted((ROOT / "examples").glob("*/*.yaml")):
        assert set(load_job(job).raw) <= set(schema["properties"]), job
