"""The API reference (``docs/api.md``), generated from the public names' docstrings.

The public names are each package's ``__all__`` (``engine``, ``criteria``,
``gates``, ``audit``, ``converge.reports``) and the job-file API of
``converge.jobs``. :func:`api_reference` renders, for each, its signature and
docstring, and for a class its public methods and properties. :func:`missing_docstrings`
lists every public class or function (and method of a concrete class) without a
docstring: a test requires it empty and the page current, so the reference cannot
silently lose a name.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["PACKAGES", "api_reference", "missing_docstrings", "public_names", "write_api_doc"]

PACKAGES: tuple[tuple[str, tuple[str, ...] | None], ...] = (
    ("engine", None),
    ("criteria", None),
    ("gates", None),
    ("audit", None),
    (
        "converge.jobs",
        (
            "load_job",
            "parse_job",
            "job_from_record",
            "import_root",
            "Job",
            "JobSpec",
            "GateSpec",
            "HitlSpec",
            "SchemaSpec",
            "MinConfidenceSpec",
        ),
    ),
    ("converge.reports", None),
)
"""The documented modules, and their public names (None: the module's ``__all__``)."""

HEADER = """# API reference

Generated from the docstrings of the public names by `converge/api_reference.py`
(`tests/test_api_reference.py` fails when this page is out of date or a public
class, function or method has no docstring). Regenerate with
`.venv/bin/python -c "from converge.api_reference import write_api_doc; write_api_doc()"`.
The concepts behind these names: `docs/concepts.md`; job files: `docs/job-files.md`.
"""


def public_names() -> Iterator[tuple[str, str, Any]]:
    """``(module, name, object)`` of every documented public name, in page order."""
    for module_name, names in PACKAGES:
        module = importlib.import_module(module_name)
        for name in names if names is not None else module.__all__:
            yield module_name, name, getattr(module, name)


def _documentable(obj: Any) -> bool:
    return inspect.isclass(obj) or inspect.isfunction(obj)


def _is_protocol(cls: type) -> bool:
    return bool(getattr(cls, "_is_protocol", False))


def _members(cls: type) -> Iterator[tuple[str, Any]]:
    """Public methods and properties defined by ``cls`` itself."""
    for attr, value in vars(cls).items():
        if attr.startswith("_"):
            continue
        if isinstance(value, property):
            yield attr, value.fget
        elif isinstance(value, staticmethod | classmethod):
            yield attr, value.__func__
        elif inspect.isfunction(value):
            yield attr, value


def missing_docstrings() -> list[str]:
    """``module.Name`` (or ``module.Name.method``) of every public class, function or
    method of a concrete class that has no docstring; protocol members are
    described by their protocol's docstring."""
    missing: list[str] = []
    for module, name, obj in public_names():
        if not _documentable(obj):
            continue
        if not (obj.__doc__ or "").strip():
            missing.append(f"{module}.{name}")
        if inspect.isclass(obj) and not _is_protocol(obj):
            missing.extend(
                f"{module}.{name}.{attr}"
                for attr, fn in _members(obj)
                if fn is not None and not (fn.__doc__ or "").strip()
            )
    return missing


def _signature(obj: Any) -> str:
    try:
        return str(inspect.signature(obj))
    except (TypeError, ValueError):
        return ""


def _doc(obj: Any) -> str:
    return inspect.cleandoc(obj.__doc__ or "").strip()


def _entry(module: str, name: str, obj: Any) -> str:
    lines = [f"### `{module}.{name}`", ""]
    if inspect.isclass(obj):
        kind = "protocol" if _is_protocol(obj) else "class"
        sig = "" if kind == "protocol" or issubclass(obj, BaseException) else _signature(obj)
        lines += [f"*{kind}* `{name}{sig}`", "", _doc(obj)]
        members = [(a, f) for a, f in _members(obj) if f is not None]
        if members:
            lines.append("")
            for attr, fn in members:
                first = _doc(fn).split("\n\n")[0].replace("\n", " ")
                lines.append(f"- `{attr}{_signature(fn)}`" + (f": {first}" if first else ""))
    elif inspect.isfunction(obj):
        lines += [f"*function* `{name}{_signature(obj)}`", "", _doc(obj)]
    else:
        lines.append(f"*{type(obj).__name__}* `{name}`")
    return "\n".join(lines).rstrip() + "\n"


def api_reference() -> str:
    """The whole page: a section per module, an entry per public name."""
    parts = [HEADER]
    current = None
    for module, name, obj in public_names():
        if module != current:
            parts.append(f"## `{module}`\n")
            current = module
        parts.append(_entry(module, name, obj))
    return "\n".join(parts)


def write_api_doc(path: str | Path = "docs/api.md") -> bool:
    """Write :func:`api_reference` to ``path``; True when it changed."""
    p = Path(path)
    text = api_reference()
    if p.exists() and p.read_text(encoding="utf-8") == text:
        return False
    p.write_text(text, encoding="utf-8")
    return True
