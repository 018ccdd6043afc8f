"""Reports: the facts a user came for, as tables (docs/job-files.md).

A job file's ``report:`` entries (:class:`ReportSpec`) name a fact key and the
content fields to show; :func:`build_reports` turns the facts of a run (a live
:class:`~engine.Context` or the facts a store recorded) into :class:`Report`
values, and :func:`render_markdown`, :func:`render_csv` and :func:`reports_json`
write them out. ``converge run`` prints them after its summary and
``converge report RUN`` renders them from the store; the rich tables are built
in :mod:`converge.cli.render`. No view cuts a value: tables wrap, CSV and
Markdown hold every character, JSON holds every fact's whole content.
"""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from converge.values import is_time_field, iso_utc, readable
from engine import Fact

__all__ = [
    "FORMATS",
    "Report",
    "ReportFormat",
    "ReportSpec",
    "build_report",
    "build_reports",
    "cell",
    "facts_by_key",
    "is_time_field",
    "iso_utc",
    "readable",
    "render_csv",
    "render_markdown",
    "reports_json",
]

ReportFormat = Literal["table", "markdown", "csv", "json"]
FORMATS: tuple[str, ...] = ("table", "markdown", "csv", "json")
"""The values of ``converge report --format``."""


class ReportSpec(BaseModel):
    """One entry of a job file's ``report:`` list.

    ``key``: the fact key whose facts are the rows, in promotion order;
    ``columns``: the content fields shown, in order (dotted for nested fields,
    ``content`` for a content that is no mapping; default: every field of the
    first fact); ``title``: the table's title (default: the key);
    ``count_by``: instead of one row per fact, one row per value of this field
    with the number of facts holding it (most frequent first);
    ``join``: how a list value is written, per column (default ``", "``; a
    dependency path reads better with ``" -> "``).
    """

    model_config = ConfigDict(extra="forbid")

    key: str = Field(min_length=1, description="The fact key whose facts are the rows.")
    columns: list[str] | None = Field(
        default=None,
        description="Content fields shown, in order (dotted for nested fields).",
    )
    title: str | None = Field(default=None, description="The table's title (default: the key).")
    count_by: str | None = Field(
        default=None, description="One row per value of this field, with its number of facts."
    )
    join: dict[str, str] = Field(
        default_factory=dict,
        description='How list values are joined, per column (default ", ").',
    )


@dataclass(frozen=True)
class Report:
    """A report built from facts: ``columns`` and ``rows`` of cell strings (never
    cut), and ``facts``, the whole content of each fact of the key."""

    title: str
    key: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    facts: tuple[Any, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: title, key, columns, rows (as objects) and the facts' contents."""
        return {
            "title": self.title,
            "key": self.key,
            "columns": list(self.columns),
            "rows": [dict(zip(self.columns, row, strict=True)) for row in self.rows],
            "facts": list(self.facts),
        }


def _field(content: Any, path: str) -> Any:
    """The value at a dotted ``path`` of a content (None when absent)."""
    if path == "content":
        return content
    value = content
    for part in path.split("."):
        if isinstance(value, dict):
            value = value.get(part)
        else:
            return None
    return value


def cell(value: Any, joiner: str = ", ") -> str:
    """A value as one table cell: strings as they are, lists joined, the rest as JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple) and all(
        isinstance(v, str | int | float) and not isinstance(v, bool) for v in value
    ):
        return joiner.join(str(v) for v in value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        return f"{value:g}" if isinstance(value, float) else str(value)
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def build_report(spec: ReportSpec, facts: Sequence[Fact]) -> Report:
    """The report ``spec`` describes, over ``facts`` (only those of ``spec.key`` are used)."""
    contents = [f.content for f in facts if f.key == spec.key]
    title = spec.title or spec.key
    if spec.count_by is not None:
        counts = Counter(cell(_field(c, spec.count_by)) for c in contents)
        ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        return Report(
            title,
            spec.key,
            (spec.count_by, "count"),
            tuple((value, str(n)) for value, n in ordered),
            tuple(contents),
        )
    columns = spec.columns
    if columns is None:
        first = contents[0] if contents else None
        columns = list(first) if isinstance(first, dict) else ["content"]
    rows = tuple(
        tuple(cell(_field(c, col), spec.join.get(col, ", ")) for col in columns) for c in contents
    )
    return Report(title, spec.key, tuple(columns), rows, tuple(contents))


def build_reports(specs: Iterable[ReportSpec], facts: Sequence[Fact]) -> list[Report]:
    """One :class:`Report` per spec, in the job file's order."""
    facts = list(facts)
    return [build_report(s, facts) for s in specs]


def facts_by_key(facts: Iterable[Fact], keys: Iterable[str] | None = None) -> dict[str, list[Any]]:
    """``{key: [content, ...]}`` in promotion order, for ``keys`` (None: every key).

    This is the ``"facts"`` member of ``converge run --json``.
    """
    listed = None if keys is None else list(keys)
    wanted = None if listed is None else set(listed)
    out: dict[str, list[Any]] = {k: [] for k in listed or ()}
    for f in facts:
        if wanted is None or f.key in wanted:
            out.setdefault(f.key, []).append(f.content)
    return out


def _md_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", "<br>")


def render_markdown(reports: Iterable[Report]) -> str:
    """GitHub-flavoured Markdown: a ``##`` heading and a table per report."""
    parts: list[str] = []
    for r in reports:
        lines = [f"## {r.title}", ""]
        if not r.rows:
            lines.append(f"(no {r.key} facts)")
        else:
            lines.append("| " + " | ".join(_md_escape(c) for c in r.columns) + " |")
            lines.append("|" + "---|" * len(r.columns))
            lines.extend("| " + " | ".join(_md_escape(v) for v in row) + " |" for row in r.rows)
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


def render_csv(reports: Iterable[Report]) -> str:
    """CSV: per report, a header row then its rows; reports apart by an empty line.

    With more than one report, each block starts with a ``# title`` line.
    """
    reports = list(reports)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    for i, r in enumerate(reports):
        if i:
            buf.write("\n")
        if len(reports) > 1:
            buf.write(f"# {r.title}\n")
        writer.writerow(r.columns)
        writer.writerows(r.rows)
    return buf.getvalue()


def reports_json(reports: Iterable[Report], run_id: str | None = None) -> dict[str, Any]:
    """``{"run_id", "reports": [...], "facts": {key: [content, ...]}}``: complete."""
    reports = list(reports)
    facts: dict[str, list[Any]] = {}
    for r in reports:
        facts.setdefault(r.key, list(r.facts))
    return {"run_id": run_id, "reports": [r.to_dict() for r in reports], "facts": facts}
