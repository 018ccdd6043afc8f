"""docs/api.md: every public name documented, and the page current."""

from __future__ import annotations

from pathlib import Path

import pytest

from converge.api_reference import api_reference, missing_docstrings, public_names

ROOT = Path(__file__).resolve().parent.parent


def test_every_public_class_function_and_method_has_a_docstring() -> None:
    assert missing_docstrings() == []


def test_the_api_page_is_generated_from_the_current_code() -> None:
    page = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    assert page == api_reference(), (
        "regenerate: .venv/bin/python -c "
        '"from converge.api_reference import write_api_doc; write_api_doc()"'
    )


def test_the_page_has_an_entry_for_every_public_name() -> None:
    page = api_reference()
    names = [f"{module}.{name}" for module, name, _ in public_names()]
    assert {"engine.Engine", "criteria.KeyPresent", "audit.open_store"} <= set(names)
    assert all(f"### `{n}`" in page for n in names)


def test_a_public_function_without_a_docstring_is_reported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import converge.reports as reports

    def undocumented() -> None:
        pass

    monkeypatch.setattr(reports, "cell", undocumented)
    assert missing_docstrings() == ["converge.reports.cell"]
