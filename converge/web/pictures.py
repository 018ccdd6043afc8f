"""Pictures drawn on the server as inline SVG: lineage graphs and budget bars.

No JavaScript and nothing fetched at run time: each picture is one ``<svg>``
element built from the store's data. A lineage is laid out in columns by
generation (``networkx.topological_generations``), parents left of children; a
graph with a cycle (keys that derive from each other, as the oscillator's) is laid
out by its nodes' order, each edge back to an earlier column drawn as an arc under
the boxes (:func:`cycle_of` names such a cycle).
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

import networkx as nx
from markupsafe import Markup, escape

from engine.budget import BudgetStatus

BOX_W, BOX_H, GAP_X, GAP_Y, PAD = 210, 46, 70, 16, 10
ARC_H = 36
"""Room under the boxes for the arcs of the edges back (a graph with a cycle)."""


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
    """A graph as SVG: each node's ``label`` (first line) and ``detail`` (second line);
    a graph with a cycle has its edges back drawn as dashed arcs under the boxes.

    Nodes without those attributes show their id. ``highlight`` is drawn in the
    accent colour (the proposal a gate holds). Returns an empty string for an
    empty graph.
    """
    if graph.number_of_nodes() == 0:
        return Markup("")
    forward, back = _forward_and_back(graph)
    columns = [sorted(layer) for layer in nx.topological_generations(forward)]
    texts = {n: _node_lines(graph.nodes[n], n) for n in graph.nodes}
    # every box as tall as the tallest: a long label wraps, it is never cut
    box_h = max(BOX_H, max(12 + LINE_H * (len(a) + len(b)) for a, b in texts.values()))
    pos: dict[str, tuple[int, int]] = {}
    for col, layer in enumerate(columns):
        for row, node in enumerate(layer):
            pos[node] = (PAD + col * (BOX_W + GAP_X), PAD + row * (box_h + GAP_Y))
    width = PAD * 2 + len(columns) * BOX_W + (len(columns) - 1) * GAP_X
    height = PAD * 2 + max(len(c) for c in columns) * (box_h + GAP_Y) - GAP_Y
    height += ARC_H if back else 0
    parts = [
        f'<svg class="picture" role="img" xmlns="http://www.w3.org/2000/svg" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}">',
        f"<title>{escape(title)}</title>",
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#6b7280"/>'
        "</marker></defs>",
    ]
    for parent, child in sorted(back):  # to an earlier column: an arc under the boxes
        x1, y1 = pos[parent][0] + BOX_W // 2, pos[parent][1] + box_h
        x2, y2 = pos[child][0] + BOX_W // 2, pos[child][1] + box_h
        low = max(y1, y2) + ARC_H
        parts.append(
            f'<path class="edge back" d="M{x1},{y1} C{x1},{low} {x2},{low} {x2},{y2}" '
            'fill="none" stroke="#6b7280" stroke-width="1.5" stroke-dasharray="5 3" '
            'marker-end="url(#arrow)"/>'
        )
    for parent, child in sorted(forward.edges()):
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


def _forward_and_back(graph: nx.DiGraph[str]) -> tuple[nx.DiGraph[str], list[tuple[str, str]]]:
    """``graph`` itself and no edge back when it has no cycle; else the graph of its
    edges that go forward in its nodes' order (the order they were added: a run's keys
    as they were first promoted) and the edges that go back."""
    if nx.is_directed_acyclic_graph(graph):
        return graph, []
    rank = {n: i for i, n in enumerate(graph.nodes)}
    forward: nx.DiGraph[str] = nx.DiGraph()
    forward.add_nodes_from(graph.nodes)
    back = []
    for a, b in graph.edges():
        if rank[a] < rank[b]:
            forward.add_edge(a, b)
        else:
            back.append((a, b))
    return forward, back


def cycle_of(graph: nx.DiGraph[str]) -> list[str] | None:
    """A cycle of ``graph`` as its nodes, first repeated at the end (``[ping, pong,
    ping]``), or None for a DAG."""
    try:
        edges = nx.find_cycle(graph)
    except nx.NetworkXNoCycle:
        return None
    return [edges[0][0], *(b for _, b in edges)]


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
