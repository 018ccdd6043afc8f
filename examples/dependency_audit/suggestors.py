"""The audit's suggestors: inventory, licenses, dependencies, copyleft risk, human review.

========================  ==========================  ========================================
suggestor                 reads                       proposes
========================  ==========================  ========================================
``inventory``             (nothing; runs once)        ``package``: one per distribution
``licenses``              ``package``                 ``license`` {name, version, spdx,
                                                      source} or
                                                      ``license.unknown`` {name, version, raw}
``dependencies``          ``package``                 ``dependency`` {from, to}
``copyleft_risk``         ``license``, ``dependency``  ``risk.copyleft`` per copyleft package
                                                      of a policy's scope, ``policy.violation``
                                                      per package the policy rejects, and
                                                      one ``risk.assessed`` summary
``human_review``          ``license.unknown``,        ``license`` {..., source: human}
                          ``hitl.rejected``
========================  ==========================  ========================================

Each reads only facts, so another suggestor (a reviewer proposing ``license``
facts, say) can be registered beside them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from engine import Context, Proposal, suggestor
from examples.dependency_audit import graph as g
from examples.dependency_audit.distributions import (
    Distribution,
    closure,
    installed_distributions,
    normalise_name,
    requirement_targets,
)
from examples.dependency_audit.findings import scan
from examples.dependency_audit.policy import TOOLS, policies
from examples.dependency_audit.spdx import classify, from_human

DistributionSource = Callable[[], Iterable[Distribution]]

VENDORED = "vendored"
"""Input key of components vendored into the project (no installed metadata)."""


class Inventory:
    """Proposes one ``package`` fact per distribution of the scope, sorted by name.

    The scope is the union of the policies' scopes (:mod:`.policy`): a root's
    runtime closure (with the extras asked for) or the whole environment, without
    pip, setuptools and wheel unless a policy asks for them.

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
        installed: dict[str, Distribution] = {}
        for dist in self.source():
            installed.setdefault(normalise_name(dist.name), dist)
        wanted: set[str] = set()
        for policy in policies(ctx):
            if policy.root is None:
                names = set(installed)
            else:
                names = set(closure(policy.root, installed, policy.extras))
            wanted |= names if policy.tools else names - (TOOLS - {policy.root or ""})
        by_name = {n: d for n, d in installed.items() if n in wanted}
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
            content: dict[str, Any] = {
                "name": name,
                "version": dist.version,
                "spdx": spdx,
                "source": source,
            }
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
    """The findings of :func:`~examples.dependency_audit.findings.scan` as facts:
    ``risk.copyleft`` ``{name, version, spdx, copyleft: strong|weak, root, path}``
    per copyleft package of a policy's scope, ``policy.violation`` ``{name,
    version, spdx, rule: forbidden|not allowed, root, path}`` per package the policy
    rejects (all of them, not only the first), each with the dependency path from
    the root; then one ``risk.assessed`` summary ``{licenses, dependencies,
    at_risk, violations}`` (fact counts the assessment saw)."""
    _, edge_facts = g.dependency_graph(ctx)
    violations, copyleft = scan(ctx)
    out: list[Proposal] = []
    for key, found in ((g.RISK, copyleft), (g.VIOLATION, violations)):
        for f in found:
            parents = (f.license_fact, *g.path_facts(list(f.path), edge_facts))
            out.append(Proposal(key, f.content(), parents=parents))
    summary = {
        "licenses": ctx.count(g.LICENSE),
        "dependencies": ctx.count(g.DEPENDENCY),
        "at_risk": len(copyleft),
        "violations": len(violations),
    }
    out.append(Proposal(g.ASSESSED, summary))
    return out


def _human_license(content: dict[str, Any], spdx: str) -> dict[str, Any]:
    return {
        "name": content["name"],
        "version": content.get("version", ""),
        "spdx": spdx,
        "source": "human",
    }


@suggestor(name="human_review", dependencies=[g.REJECTED, g.UNKNOWN])
def human_review(ctx: Context) -> list[Proposal]:
    """A person's classification at a ``license.unknown`` gate, as a ``license`` fact
    ``{name, version, spdx, source: "human"}`` (the key the report's Licenses table
    and the findings read), whichever way it was given:

    - approved with a value (``converge approve GATE --by NAME --value MIT``): the
      promoted ``license.unknown`` fact carries ``spdx`` and ``source: "human"``
      (the gate's ``spdx_value`` hook put them there);
    - (runs recorded before that way was documented) rejected with a reason that
      is an SPDX id or free text the table maps (e.g. "MIT License"): the engine's
      ``hitl.rejected`` diagnostic, read so that those runs replay as they ran. A
      rejection is a refusal: ``reject --reason WHY`` classifies nothing (see
      ``all_classified``); a classification is ``approve --value``.
    """
    out: list[Proposal] = []
    for fact in ctx.get(g.UNKNOWN):
        c = fact.content
        if isinstance(c, dict) and c.get("source") == "human" and isinstance(c.get("spdx"), str):
            spdx = from_human(c["spdx"])
            if spdx is not None and "name" in c:
                out.append(Proposal(g.LICENSE, _human_license(c, spdx), parents=(fact.id,)))
    for fact in ctx.get(g.REJECTED):
        c = fact.content
        if c.get("key") != g.UNKNOWN or not isinstance(c.get("content"), dict):
            continue
        spdx = from_human(c.get("reason"))
        if spdx is None:
            continue
        out.append(Proposal(g.LICENSE, _human_license(c["content"], spdx), parents=(fact.id,)))
    return out


def audit_suggestors(source: DistributionSource = installed_distributions) -> list[Any]:
    """Every suggestor of the audit, with the inventory reading ``source``."""
    return [Inventory(source), licenses, dependencies, copyleft_risk, human_review]
