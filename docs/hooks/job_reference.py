"""The reference of every job-file key, rendered from the JSON Schema.

:func:`reference` gives one table per model of ``converge schema``'s JSON Schema
(``job_file_schema()``): the top level, then each model in ``$defs`` under the key
where it sits in a job file (``gates[].hitl``), each property with its type, default
and description, and the keys without a description (``Field(description=...)`` on
their pydantic model: ``tests/test_docs_site.py`` fails on any).
``docs/hooks/reference.py`` writes the tables into ``docs/job-files.md``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

SCALARS = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "null": "null"}


def _ref_name(node: dict[str, Any]) -> str:
    return str(node["$ref"]).rsplit("/", 1)[-1]


def type_text(node: dict[str, Any]) -> str:
    """A short Python-like spelling of a JSON Schema type: ``list[str] | null``."""
    if "$ref" in node:
        return _ref_name(node)
    if "enum" in node:
        return " | ".join(json.dumps(v) for v in node["enum"])
    if "const" in node:
        return json.dumps(node["const"])
    for union in ("anyOf", "oneOf"):
        if union in node:
            return " | ".join(type_text(n) for n in node[union])
    kind = node.get("type")
    if isinstance(kind, list):
        return " | ".join(type_text({**node, "type": k}) for k in kind)
    if kind == "array":
        if "prefixItems" in node:
            return "tuple[" + ", ".join(type_text(n) for n in node["prefixItems"]) + "]"
        return f"list[{type_text(node.get('items', {}))}]"
    if kind == "object":
        values = node.get("additionalProperties", True)
        value = type_text(values) if isinstance(values, dict) else "Any"
        return f"dict[str, {value}]"
    return SCALARS.get(str(kind), "Any")


def default_text(key: str, node: dict[str, Any], required: set[str]) -> str:
    """``**required**``, the default as JSON, or what an omitted key means."""
    if key in required:
        return "**required**"
    if "default" in node:
        return f"`{json.dumps(node['default'])}`"
    if "$ref" in node:
        return "its table's defaults"
    return {"array": "`[]`", "object": "`{}`"}.get(str(node.get("type")), "")


def _nested(node: dict[str, Any], where: str) -> Iterator[tuple[str, str]]:
    """``(location, model)`` of each model a property's schema refers to."""
    if "$ref" in node:
        yield where, _ref_name(node)
    for union in ("anyOf", "oneOf", "allOf"):
        for sub in node.get(union, []):
            yield from _nested(sub, where)
    if isinstance(node.get("items"), dict):
        yield from _nested(node["items"], f"{where}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _nested(node["additionalProperties"], f"{where}.*")


def models(schema: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """``(location, model name, model schema)``: the top level, then each model of
    ``$defs`` after the model holding it (first location only); unreached ones last."""
    defs: dict[str, Any] = schema.get("$defs", {})
    out: list[tuple[str, str, dict[str, Any]]] = []
    seen: set[str] = set()

    def visit(where: str, name: str, model: dict[str, Any]) -> None:
        out.append((where, name, model))
        for key, prop in model.get("properties", {}).items():
            for location, ref in _nested(prop, key if where == "top level" else f"{where}.{key}"):
                if ref not in seen and ref in defs:
                    seen.add(ref)
                    visit(location, ref, defs[ref])

    visit("top level", "top level", schema)
    for name, model in defs.items():
        if name not in seen:
            out.append((name, name, model))
    return out


def _cell(text: str) -> str:
    """``text`` on one line, its pipes escaped outside code spans (a pipe inside
    backticks does not split a table cell)."""
    parts = " ".join(text.split()).split("`")
    return "`".join(p if i % 2 else p.replace("|", "\\|") for i, p in enumerate(parts))


def reference(schema: dict[str, Any]) -> tuple[str, list[str]]:
    """The Markdown tables of every model of ``schema``, and the key path (and model)
    of each property without a description."""
    parts: list[str] = []
    undescribed: list[str] = []
    for where, name, model in models(schema):
        anchor = re.sub(r"[^a-z0-9]+", "-", where.lower()).strip("-")
        required = set(model.get("required", []))
        lines = [
            f"### `{where}` {{ #{anchor} }}",
            "",
            f"Model: `{name}`." if where != "top level" else "The keys of a job file.",
            "",
            "| key | type | default | description |",
            "|---|---|---|---|",
        ]
        for key, prop in model.get("properties", {}).items():
            description = prop.get("description", "")
            if not description:
                undescribed.append(
                    f"{key} (top level)" if where == "top level" else f"{where}.{key} ({name})"
                )
            lines.append(
                f"| `{key}` | `{type_text(prop)}` "
                f"| {default_text(key, prop, required)} | {_cell(description)} |"
            )
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n", undescribed
