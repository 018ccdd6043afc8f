"""Pictures drawn on the server as inline SVG: lineage graphs and budget bars.

No JavaScript and nothing fetched at run time: each picture is one ``<svg>``
element built from the store's data. A lineage is laid out in columns by
generation (``networkx.topological_generations``), parents left of children.
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

import networkx as nx
from markupsafe import Markup, escape

from engine.budget import BudgetStatus

BOX_W, BOX_H, GAP_X, GAP_Y, PAD = 210, 46, 70, 16, 10


LINE_H, LABEL_CHARS, DETAIL_CHARS, DETAIL_LINES = 16, 26, 30, 3


def _text(value: Any) -> str:
    if isinstance(value, dict):
        # the scalar fields first (name, version, ...): what identifies the fact
        scalars = [f"{k}={v}" for k, v in value.items() if isinstance(v, str | int | float)]
        return ", ".join(scalars) if scalars else json.dumps(value, ensure_ascii=False)
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _lines(value: Any, width: int, most: int | None = None) -> list[str]:
    """``value`` wrapped to ``width`` characters at spaces and after hyphens; at
    most ``most`` lines (the last one then ends with "…"): a label is never cut."""
    lines = textwrap.wrap(_text(value), width, break_on_hyphens=True) or [""]
    if most is not None and len(lines) > most:
        lines = [*lines[: most - 1], lines[most - 1][: width - 1] + "…"]
    return lines


def _node_lines(data: dict[str, Any], node: str) -> tuple[list[str], list[str]]:
    """A node's label lines (whole) and detail lines (at most :data:`DETAIL_LINES`)."""
    label = _lines(data.get("label", node), LABEL_CHARS)
    detail = _lines(data.get("detail", ""), DETAIL_CHARS, DETAIL_LINES)
    return label, [d for d in detail if d]


def graph_svg(graph: nx.DiGraph[str], *, title: str, highlight: str | None = None) -> Markup:
    """A DAG as SVG: each node's ``label`` (first line) and ``detail`` (second line).

    Nodes without those attributes show their id. ``highlight`` is drawn in the
    accent colour (the proposal a gate holds). Returns an empty string for an
    empty graph.
    """
    if graph.number_of_nodes() == 0:
        return Markup("")
    columns = [sorted(layer) for layer in nx.topological_generations(graph)]
    texts = {n: _node_lines(graph.nodes[n], n) for n in graph.nodes}
    # every box as tall as the tallest: a long label wraps, it is never cut
    box_h = max(BOX_H, max(12 + LINE_H * (len(a) + len(b)) for a, b in texts.values()))
    pos: dict[str, tuple[int, int]] = {}
    for col, layer in enumerate(columns):
        for row, node in enumerate(layer):
            pos[node] = (PAD + col * (BOX_W + GAP_X), PAD + row * (box_h + GAP_Y))
    width = PAD * 2 + len(columns) * BOX_W + (len(columns) - 1) * GAP_X
    height = PAD * 2 + max(len(c) for c in columns) * (box_h + GAP_Y) - GAP_Y
    parts = [
        f'<svg class="picture" role="img" xmlns="http://www.w3.org/2000/svg" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}">',
        f"<title>{escape(title)}</title>",
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#6b7280"/>'
        "</marker></defs>",
    ]
    for parent, child in sorted(graph.edges()):
        x1, y1 = pos[parent][0] + BOX_W, pos[parent][1] + box_h // 2
        x2, y2 = pos[child][0], pos[child][1] + box_h // 2
        mid = (x1 + x2) // 2
        parts.append(
            f'<path class="edge" d="M{x1},{y1} C{mid},{y1} {mid},{y2} {x2},{y2}" '
            'fill="none" stroke="#6b7280" stroke-width="1.5" marker-end="url(#arrow)"/>'
        )
    for node, (x, y) in pos.items():
        label, detail = texts[node]
        cls = "node highlight" if node == highlight else "node"
        fill = "#fde68a" if node == highlight else "#e0ecff"
        parts.append(
            f'<g class="{cls}" data-id="{escape(node)}"><rect x="{x}" y="{y}" width="{BOX_W}" '
            f'height="{box_h}" rx="6" fill="{fill}" stroke="#1f3a68"/>'
        )
        lines = [(t, ' font-size="13" font-weight="bold" class="label"') for t in label]
        lines += [(t, ' font-size="12" class="detail"') for t in detail]
        for i, (text, attrs) in enumerate(lines):
            parts.append(
                f'<text x="{x + 8}" y="{y + 18 + LINE_H * i}"{attrs}>{escape(text)}</text>'
            )
        parts.append("</g>")
    parts.append("</svg>")
    return Markup("".join(parts))


def budget_svg(status: BudgetStatus) -> Markup:
    """One horizontal bar per budget dimension: used / limit, coloured by percent.

    Unlimited dimensions show their use with an empty bar and "no limit".
    """
    rows = list(status.dimensions.items())
    width, bar_x, bar_w, row_h = 620, 150, 300, 28
    height = max(len(rows), 1) * row_h + 8
    parts = [
        f'<svg class="picture budget" role="img" xmlns="http://www.w3.org/2000/svg" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}">',
        f"<title>budget used: overall {status.percent:.1f}%</title>",
    ]
    for i, (name, dim) in enumerate(rows):
        y = 4 + i * row_h
        pct = min(dim.percent or 0.0, 100.0)
        colour = "#16a34a" if pct < 75 else "#d97706" if pct < 100 else "#dc2626"
        used = f"{dim.used:g}"
        text = f"{used} / {dim.limit:g} ({dim.percent:.1f}%)" if dim.limit else f"{used} (no limit)"
        parts.append(
            f'<g class="bar" data-dimension="{escape(name)}">'
            f'<text x="0" y="{y + 17}" font-size="13">{escape(name)}</text>'
            f'<rect x="{bar_x}" y="{y + 4}" width="{bar_w}" height="18" rx="3" fill="#e5e7eb"/>'
            f'<rect x="{bar_x}" y="{y + 4}" width="{bar_w * pct / 100:.1f}" height="18" rx="3" '
            f'fill="{colour}"/>'
            f'<text x="{bar_x + bar_w + 10}" y="{y + 17}" font-size="13">{escape(text)}</text></g>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))
