"""docs/operations.md and its files are the code's (issue 57, part A, item 5): the
metrics table lists exactly the families ``/metrics`` answers, with their types and
labels; every panel of the Grafana dashboard and every rule queries metrics that
exist; the dashboard is valid JSON; the page shows the screenshot it names."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from audit import open_store
from converge import metrics
from converge.access import MetricsAccess
from converge.web import create_app
from tests.metricsfixtures import RULES

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "operations.md"
DASHBOARD = ROOT / "docs" / "operations" / "converge-dashboard.json"
METRIC = re.compile(r"\b(converge_[a-z_]+|up)\b(?!\s*\()")
SUFFIXES = ("_bucket", "_count", "_sum", "_total")
LABELS = {
    m._name: m._labelnames  # type: ignore[attr-defined]
    for m in vars(metrics).values()
    if hasattr(m, "_labelnames") and hasattr(m, "_name")
}
"""Each family's declared label names (prometheus_client's metric objects)."""


def _exposed(tmp_path: Path) -> dict[str, tuple[str, set[str]]]:
    """Each family ``/metrics`` answers: its exposed name, type and label names."""
    store = open_store(str(tmp_path / "doc.db"))
    try:
        text = TestClient(create_app(store, metrics_access=MetricsAccess.PUBLIC)).get("/metrics")
    finally:
        store.close()
    out = {}
    for family in text_string_to_metric_families(text.text):
        if not family.name.startswith("converge_"):
            continue
        name = family.name + ("_total" if family.type == "counter" else "")
        declared = LABELS.get(family.name, ())  # a labelled family may have no sample yet
        labels = {k for s in family.samples for k in s.labels if k != "le"} | set(declared)
        out[name] = (family.type, labels)
    return out


def _doc_table() -> dict[str, tuple[str, set[str]]]:
    block = DOC.read_text().split("<!-- metrics-table")[1].split("<!-- /metrics-table -->")[0]
    rows = [ln for ln in block.splitlines() if ln.startswith("| `")]
    table = {}
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        labels = {c.strip(" `") for c in cells[2].split(",") if c.strip()}
        table[cells[0].strip("`")] = (cells[1], labels)
    return table


def _known(name: str, families: set[str]) -> bool:
    if name == "up" or name in families:
        return True
    return any(name.endswith(s) and name.removesuffix(s) in families for s in SUFFIXES)


def test_the_metrics_table_is_what_metrics_answers(tmp_path: Path) -> None:
    assert _doc_table() == _exposed(tmp_path)


def test_every_dashboard_panel_and_rule_queries_metrics_that_exist(tmp_path: Path) -> None:
    families = {n.removesuffix("_total") for n in _exposed(tmp_path)} | set(_exposed(tmp_path))
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    groups = yaml.safe_load(RULES.read_text())["groups"]
    exprs += [r["expr"] for g in groups for r in g["rules"]]
    unknown = {n for e in exprs for n in METRIC.findall(e) if not _known(n, families)}

    assert unknown == set()
    assert len(dashboard["panels"]) >= 10 and all(p["targets"] for p in dashboard["panels"])
    assert all(METRIC.search(e) for e in exprs)
    named = {n for e in exprs for n in METRIC.findall(e)}
    for family in ("converge_runs_stopped_total", "converge_gate_wait_seconds_bucket"):
        assert family in named


def test_the_page_shows_its_screenshot_and_links_its_files() -> None:
    text = DOC.read_text()
    for image in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text):
        assert (DOC.parent / image).is_file(), image
    assert "images/prometheus-graph.png" in text
    assert "operations/converge-rules.yml" in text
    assert "operations/converge-dashboard.json" in text
