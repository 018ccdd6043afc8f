"""The reference pages generated into docs/ (issue 59 item 8) are what
``docs/hooks/reference.py`` generates from the code now: the job-file keys in
docs/job-files.md, the command line (docs/cli.md), the HTTP API (docs/http-api.md)
and the Python API at a glance (docs/python-api.md); each page is in the site's nav."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUN = "run: python docs/hooks/reference.py"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "docs_reference", ROOT / "docs" / "hooks" / "reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


reference = _generator()


@pytest.mark.parametrize("page", sorted(reference.PAGES))
def test_each_generated_page_is_what_the_code_generates_now(page: str) -> None:
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    assert text == reference.PAGES[page](), f"docs/{page} is stale; {RUN}"


def test_the_job_file_keys_in_the_page_are_what_the_schema_gives_now() -> None:
    text = reference.KEYS_PAGE.read_text(encoding="utf-8")
    assert text == reference.keys_page(text), f"docs/job-files.md's keys are stale; {RUN}"
    # every key of the schema has its row, in the repository (not only on the site)
    from converge.cli.schema import job_file_schema

    for key in job_file_schema()["properties"]:
        assert f"| `{key}` |" in text, key


def test_every_command_route_and_name_is_on_its_page() -> None:
    cli = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    for path, _ in reference._commands():
        assert f"## `{' '.join(path)}`" in cli, path
    assert "`--by`" in cli.split("## `converge runs`")[1].split("## ")[0]  # item 4
    http = (ROOT / "docs" / "http-api.md").read_text(encoding="utf-8")
    for route in reference.openapi()["paths"]:
        if route.startswith("/api/"):
            assert f" {route}`" in http, route
    python = (ROOT / "docs" / "python-api.md").read_text(encoding="utf-8")
    assert "| `Engine` | class |" in python and "| `open_store` | function |" in python


def test_a_stale_page_fails_this_test(tmp_path: Path) -> None:
    # what the tests above compare: a page changed by a command added since differs
    page = reference.cli_page()
    assert page.replace("## `converge runs`", "## `converge runz`") != page
    text = reference.KEYS_PAGE.read_text(encoding="utf-8")
    stale = re.sub(r"\| `budget` \|[^\n]*", "| `budget` | old |", text, count=1)
    assert stale != text and reference.keys_page(stale) == text


def test_the_generated_pages_are_in_the_sites_nav() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for page in reference.PAGES:
        assert f": {page}" in nav, page
    assert "job_reference.py" not in nav  # the keys are in the page: no build-time hook
