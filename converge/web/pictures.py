"""Pictures drawn on the server as inline SVG: lineage graphs and budget bars.

No JavaScript and nothing fetched at run time: each picture is one ``<svg>``
element built from the store's data. A lineage is laid out in columns by
generation (``networkx.topological_generations``), parents left of children.
"""

from __future__ import annotations

import json
from typing import Any

import networkx as nx
from markupsafe import Markup, escape

from engine.budget import BudgetStatus

BOX_W, BOX_H, GAP_X, GAP_Y, PAD = 210, 46, 70, 16, 10


def _short(value: Any, width: int = 28) -> str:
    if isinstance(value, dict):
        # the scalar fields first (name, version, ...): what identifies the fact
        scalars = [f"{k}={v}" for k, v in value.items() if isinstance(v, str | int | float)]
        text = ", ".join(scalars) if scalars else json.dumps(value, ensure_ascii=False)
    else:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 1] + "…"


def graph_svg(graph: nx.DiGraph[str], *, title: str, highlight: str | None = None) -> Markup:
    """A DAG as SVG: each node's ``label`` (first line) and ``detail`` (second line).

    Nodes without those attributes show their id. ``highlight`` is drawn in the
    accent colour (the proposal a gate holds). Returns an empty string for an
    empty graph.
    """
    if graph.number_of_nodes() == 0:
        return Markup("")
    columns = [sorted(layer) for layer in nx.topological_generations(graph)]
    pos: dict[str, tuple[int, int]] = {}
    for col, layer in enumerate(columns):
        for row, node in enumerate(layer):
            pos[node] = (PAD + col * (BOX_W + GAP_X), PAD + row * (BOX_H + GAP_Y))
    width = PAD * 2 + len(columns) * BOX_W + (len(columns) - 1) * GAP_X
    height = PAD * 2 + max(len(c) for c in columns) * (BOX_H + GAP_Y) - GAP_Y
    parts = [
        f'<svg class="picture" role="img" xmlns="http://www.w3.org/2000/svg" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}">',
        f"<title>{escape(title)}</title>",
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#6b7280"/>'
        "</marker></defs>",
    ]
    for parent, child in sorted(graph.edges()):
        x1, y1 = pos[parent][0] + BOX_W, pos[parent][1] + BOX_H // 2
        x2, y2 = pos[child][0], pos[child][1] + BOX_H // 2
        mid = (x1 + x2) // 2
        parts.append(
            f'<path class="edge" d="M{x1},{y1} C{mid},{y1} {mid},{y2} {x2},{y2}" '
            'fill="none" stroke="#6b7280" stroke-width="1.5" marker-end="url(#arrow)"/>'
        )
    for node, (x, y) in pos.items():
        data = graph.nodes[node]
        label = _short(data.get("label", node))
        detail = _short(data.get("detail", ""), 32)
        cls = "node highlight" if node == highlight else "node"
        fill = "#fde68a" if node == highlight else "#e0ecff"
        parts.append(
            f'<g class="{cls}" data-id="{escape(node)}"><rect x="{x}" y="{y}" width="{BOX_W}" '
            f'height="{BOX_H}" rx="6" fill="{fill}" stroke="#1f3a68"/>'
            f'<text x="{x + 8}" y="{y + 18}" font-size="13" font-weight="bold">'
            f"{escape(label)}</text>"
            f'<text x="{x + 8}" y="{y + 36}" font-size="12">{escape(detail)}</text></g>'
        )
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
