"""Views of the context the audit's suggestors, invariant and criteria share.

The dependency graph is a ``networkx.DiGraph`` whose nodes are package names and
whose edges come from ``dependency`` facts; the transitive closure of a package
is its set of descendants.
"""

from __future__ import annotations

import itertools
from typing import Any

import networkx as nx

from engine import Context, Fact
from examples.dependency_audit.distributions import Distribution, requirement_targets
from examples.dependency_audit.policy import TOOLS, Policy

PACKAGE = "package"
LICENSE = "license"
UNKNOWN = "license.unknown"
DEPENDENCY = "dependency"
RISK = "risk.copyleft"
VIOLATION = "policy.violation"
ASSESSED = "risk.assessed"
REJECTED = "hitl.rejected"
POLICY = "policy"


def packages(ctx: Context) -> dict[str, Fact]:
    """The ``package`` fact of each package name (the first one promoted)."""
    out: dict[str, Fact] = {}
    for fact in ctx.get(PACKAGE):
        out.setdefault(fact.content["name"], fact)
    return out


def licenses(ctx: Context) -> dict[str, Fact]:
    """The current ``license`` fact of each package: a human's classification wins,
    otherwise the first one promoted."""
    out: dict[str, Fact] = {}
    for fact in ctx.get(LICENSE):
        name = fact.content["name"]
        if name not in out or fact.content.get("source") == "human":
            out[name] = fact
    return out


def dependency_graph(ctx: Context) -> tuple[nx.DiGraph[str], dict[tuple[str, str], str]]:
    """The dependency graph (every package a node) and the fact id of each edge."""
    graph: nx.DiGraph[str] = nx.DiGraph()
    graph.add_nodes_from(sorted(packages(ctx)))
    edge_facts: dict[tuple[str, str], str] = {}
    for fact in ctx.get(DEPENDENCY):
        edge = (fact.content["from"], fact.content["to"])
        graph.add_edge(*edge)
        edge_facts.setdefault(edge, fact.id)
    return graph, edge_facts


def closure(graph: nx.DiGraph[str], root: str) -> set[str]:
    """``root`` and every package it depends on, directly or transitively."""
    if root not in graph:
        return set()
    found: set[str] = nx.descendants(graph, root)
    return found | {root}


def shortest_paths(graph: nx.DiGraph[str], root: str) -> dict[str, list[str]]:
    """A shortest dependency path from ``root`` to each package in its closure
    (deterministic: nodes and edges are added in sorted / promotion order)."""
    if root not in graph:
        return {}
    paths: dict[str, list[str]] = nx.single_source_shortest_path(graph, root)
    return paths


def path_facts(path: list[str], edge_facts: dict[tuple[str, str], str]) -> list[str]:
    """The ids of the ``dependency`` facts along ``path``."""
    return [edge_facts[(a, b)] for a, b in itertools.pairwise(path) if (a, b) in edge_facts]


def content_of(fact: Fact) -> dict[str, Any]:
    """A fact's content as a dict (the audit's facts are all objects)."""
    content: dict[str, Any] = fact.content
    return content


def scope_paths(ctx: Context, policy: Policy) -> dict[str, list[str]]:
    """Each package of ``policy``'s scope and a shortest dependency path to it from
    the root (the root's requested extras count; pip, setuptools and wheel are left
    out unless ``policy.tools``). For the whole environment, paths start at a
    package nothing depends on."""
    graph, _ = dependency_graph(ctx)
    pkgs = packages(ctx)
    if policy.root is not None and policy.extras and policy.root in pkgs:
        dists = {n: Distribution.from_content(f.content) for n, f in pkgs.items()}
        for target in requirement_targets(policy.root, dists, policy.extras):
            if target in pkgs:
                graph.add_edge(policy.root, target)
    if not policy.tools:
        graph.remove_nodes_from([t for t in TOOLS if t != policy.root])
    if policy.root is not None:
        return shortest_paths(graph, policy.root)
    tops = sorted(n for n in graph.nodes if graph.in_degree(n) == 0)
    graph.add_edges_from(("", top) for top in tops)
    found = {n: p[1:] for n, p in shortest_paths(graph, "").items() if n}
    for n in graph.nodes:  # packages only reachable through a cycle
        if n:
            found.setdefault(n, [n])
    return found
