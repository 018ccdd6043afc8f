"""The audit's suggestors: inventory, licenses, dependencies, copyleft risk, human review.

========================  ==========================  ========================================
suggestor                 reads                       proposes
========================  ==========================  ========================================
``inventory``             (nothing; runs once)        ``package``: one per distribution
``licenses``              ``package``                 ``license`` {name, spdx, source} or
                                                      ``license.unknown`` {name, version, raw}
``dependencies``          ``package``                 ``dependency`` {from, to}
``copyleft_risk``         ``license``, ``dependency``  ``risk.copyleft`` per package whose
                                                      closure holds a copyleft license, and
                                                      one ``risk.assessed`` summary
``human_review``          ``hitl.rejected``           ``license`` {name, spdx, source: human}
========================  ==========================  ========================================
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from engine import Context, Proposal, suggestor
from examples.dependency_audit import graph as g
from examples.dependency_audit.distributions import (
    Distribution,
    installed_distributions,
    normalise_name,
    requirement_targets,
)
from examples.dependency_audit.spdx import classify, from_human, is_copyleft

DistributionSource = Callable[[], Iterable[Distribution]]

VENDORED = "vendored"
"""Input key of components vendored into the project (no installed metadata)."""


class Inventory:
    """Proposes one ``package`` fact per distribution of ``source``, sorted by name.

    ``source`` defaults to :func:`installed_distributions` (the running
    environment); tests pass fixed, synthetic distributions. It has no dependency
    and declines every cycle once ``package`` facts exist, so it runs once.
    """

    dependencies: frozenset[str] = frozenset()

    def __init__(
        self, source: DistributionSource = installed_distributions, name: str = "inventory"
    ) -> None:
        self.source = source
        self.name = name

    def accepts(self, ctx: Context) -> bool:
        """Only until the inventory is taken."""
        return not ctx.has(g.PACKAGE)

    def execute(self, ctx: Context) -> list[Proposal]:
        """One ``package`` proposal per distinct normalised name, in name order.

        Components declared in the job's ``vendored`` input facts (code copied into
        the project, with no installed metadata: ``{name, version, license?,
        license_expression?, classifiers?, requires?}``) are inventoried too.
        """
        by_name: dict[str, Distribution] = {}
        for dist in self.source():
            by_name.setdefault(normalise_name(dist.name), dist)
        for fact in ctx.get(VENDORED):
            c = fact.content
            if isinstance(c, dict) and isinstance(c.get("name"), str):
                dist = Distribution.from_content({"version": "unknown", **c})
                by_name.setdefault(normalise_name(dist.name), dist)
        return [Proposal(g.PACKAGE, by_name[n].to_content()) for n in sorted(by_name)]


inventory = Inventory()


def _raw(dist: Distribution) -> str:
    """What a reviewer needs to classify a package: its license metadata, in short."""
    parts: list[str] = []
    if dist.license_expression:
        parts.append(f"License-Expression: {dist.license_expression}")
    if dist.license:
        first = next(line.strip() for line in dist.license.splitlines() if line.strip())
        parts.append(f"License: {first[:120]}")
    if dist.classifiers:
        parts.append("Classifiers: " + "; ".join(dist.classifiers))
    return " | ".join(parts) or "(no license metadata)"


@suggestor(name="licenses", dependencies=[g.PACKAGE])
def licenses(ctx: Context) -> list[Proposal]:
    """Classify each package without a license: SPDX id, or a ``license.unknown`` proposal."""
    known = g.licenses(ctx)
    out: list[Proposal] = []
    for name, fact in sorted(g.packages(ctx).items()):
        if name in known:
            continue
        dist = Distribution.from_content(fact.content)
        found = classify(dist.license_expression, dist.license, dist.classifiers)
        if found is not None:
            spdx, source = found
            content: dict[str, Any] = {"name": name, "spdx": spdx, "source": source}
            out.append(Proposal(g.LICENSE, content, parents=(fact.id,)))
        else:
            content = {"name": name, "version": dist.version, "raw": _raw(dist)}
            out.append(Proposal(g.UNKNOWN, content, parents=(fact.id,)))
    return out


@suggestor(name="dependencies", dependencies=[g.PACKAGE])
def dependencies(ctx: Context) -> list[Proposal]:
    """One ``dependency`` edge per requirement that applies here (see
    :func:`~examples.dependency_audit.distributions.requirement_targets`)."""
    facts = g.packages(ctx)
    dists = {name: Distribution.from_content(f.content) for name, f in facts.items()}
    return [
        Proposal(g.DEPENDENCY, {"from": name, "to": target}, parents=(facts[name].id,))
        for name in sorted(dists)
        for target in requirement_targets(name, dists)
    ]


@suggestor(name="copyleft_risk", dependencies=[g.LICENSE, g.UNKNOWN, g.DEPENDENCY])
def copyleft_risk(ctx: Context) -> list[Proposal]:
    """For each package whose transitive closure holds a copyleft license (GPL, LGPL,
    AGPL, MPL, EPL families; the package's own license aside), a ``risk.copyleft``
    fact ``{name, dependency, spdx, path, copyleft}``: the nearest such dependency,
    the dependency path to it, and every copyleft package of the closure. Then one
    ``risk.assessed`` summary ``{licenses, dependencies, at_risk}`` (fact counts the
    assessment saw)."""
    graph, edge_facts = g.dependency_graph(ctx)
    lic = g.licenses(ctx)
    copyleft = {n: f for n, f in lic.items() if is_copyleft(f.content["spdx"])}
    out: list[Proposal] = []
    for name in sorted(graph.nodes):
        paths = g.shortest_paths(graph, name)
        hits = sorted((len(p), t) for t, p in paths.items() if t != name and t in copyleft)
        if not hits:
            continue
        target = hits[0][1]
        path = paths[target]
        content = {
            "name": name,
            "dependency": target,
            "spdx": copyleft[target].content["spdx"],
            "path": path,
            "copyleft": sorted(t for _, t in hits),
        }
        parents = (copyleft[target].id, *g.path_facts(path, edge_facts))
        out.append(Proposal(g.RISK, content, parents=parents))
    summary = {
        "licenses": ctx.count(g.LICENSE),
        "dependencies": ctx.count(g.DEPENDENCY),
        "at_risk": len(out),
    }
    out.append(Proposal(g.ASSESSED, summary))
    return out


@suggestor(name="human_review", dependencies=[g.REJECTED])
def human_review(ctx: Context) -> list[Proposal]:
    """Turn a rejected ``license.unknown`` gate whose reason is an SPDX id (or free
    text the table maps, e.g. "MIT License") into a ``license`` fact with source
    ``"human"``. Other reasons classify nothing (see ``all_classified``)."""
    out: list[Proposal] = []
    for fact in ctx.get(g.REJECTED):
        c = fact.content
        if c.get("key") != g.UNKNOWN or not isinstance(c.get("content"), dict):
            continue
        spdx = from_human(c.get("reason"))
        if spdx is None:
            continue
        content = {"name": c["content"]["name"], "spdx": spdx, "source": "human"}
        out.append(Proposal(g.LICENSE, content, parents=(fact.id,)))
    return out


def audit_suggestors(source: DistributionSource = installed_distributions) -> list[Any]:
    """Every suggestor of the audit, with the inventory reading ``source``."""
    return [Inventory(source), licenses, dependencies, copyleft_risk, human_review]
