"""The audit's invariant and criteria, and the policy that configures them.

Policy: which root package to guard and which licenses it must never depend on.
Read from the run's ``policy`` facts (``initial: {policy: [{root: converge,
forbidden: [AGPL-3.0-only]}]}``), else from ``$CONVERGE_AUDIT_ROOT`` and
``$CONVERGE_AUDIT_FORBIDDEN`` (comma-separated SPDX ids), else the defaults
(root ``converge``; ``AGPL-3.0-only`` and ``AGPL-3.0-or-later``).

Human review (the job gates ``license.unknown`` with a HITL gate):

- **approve** a ``license.unknown`` gate: a person accepts the package as
  reviewed with an unknown license; the fact is promoted and counts as classified.
- **reject** it with ``--reason <SPDX id>`` (or free text the table maps, such as
  "MIT License"): a person classifies the package; ``human_review`` turns the
  engine's ``hitl.rejected`` diagnostic into a ``license`` fact with source
  ``"human"``. A reason that is no license leaves the package unclassified, and
  the run ends with ``CriteriaUnmet`` naming it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from engine import Blocked, Context, CriterionResult, Met, Unmet, Violation
from engine.stop import InvariantClass
from examples.dependency_audit import graph as g
from examples.dependency_audit.spdx import canonical, from_human, unavoidable

DEFAULT_ROOT = "converge"
DEFAULT_FORBIDDEN = ("AGPL-3.0-only", "AGPL-3.0-or-later")
ENV_ROOT = "CONVERGE_AUDIT_ROOT"
ENV_FORBIDDEN = "CONVERGE_AUDIT_FORBIDDEN"


@dataclass(frozen=True)
class Policy:
    """``root``: the package whose closure is guarded; ``forbidden``: SPDX ids."""

    root: str
    forbidden: tuple[str, ...]


def default_policy() -> Policy:
    """The policy of the environment variables, else the defaults."""
    root = os.environ.get(ENV_ROOT, "").strip() or DEFAULT_ROOT
    env = [f.strip() for f in os.environ.get(ENV_FORBIDDEN, "").split(",") if f.strip()]
    return Policy(root, tuple(env) if env else DEFAULT_FORBIDDEN)


def policies(ctx: Context) -> list[Policy]:
    """The policies of the ``policy`` facts (missing fields from :func:`default_policy`),
    or the default policy alone when there is none."""
    base = default_policy()
    out: list[Policy] = []
    for fact in ctx.get(g.POLICY):
        c = fact.content if isinstance(fact.content, dict) else {}
        root = str(c.get("root") or base.root)
        forbidden = c.get("forbidden")
        out.append(Policy(root, tuple(forbidden) if forbidden else base.forbidden))
    return out or [base]


class NoForbiddenLicense:
    """Semantic invariant: no package in a root's closure (the root included) has a
    forbidden license it cannot avoid (``MIT OR AGPL-3.0-only`` can be used under
    MIT). The violation names the package, its license and the dependency path."""

    name = "no_forbidden_license"
    invariant_class = InvariantClass.SEMANTIC

    def check(self, ctx: Context) -> Violation | None:
        """The first forbidden license found in a root's closure, by package name."""
        if not ctx.has(g.LICENSE):
            return None
        graph, _ = g.dependency_graph(ctx)
        lic = g.licenses(ctx)
        for policy in policies(ctx):
            forbidden = {canonical(f) or f for f in policy.forbidden}
            paths = g.shortest_paths(graph, policy.root)
            for name in sorted(paths):
                fact = lic.get(name)
                if fact is None:
                    continue
                spdx = fact.content["spdx"]
                if unavoidable(spdx, forbidden.__contains__):
                    return Violation(
                        f"{name} is licensed {spdx}, forbidden in the closure of "
                        f"{policy.root} ({' -> '.join(paths[name])})"
                    )
        return None


no_forbidden_license = NoForbiddenLicense()


@dataclass
class AllClassified:
    """Met when every package has a ``license`` fact or was reviewed by a human.

    With ``unknown_is_reviewed`` (the default) a ``license.unknown`` fact counts as
    reviewed: the job gates that key, so the fact exists only once a person
    approved it. Without the gate, use ``unknown_is_reviewed=False``: unknowns then
    block the run on a human (``HumanInterventionRequired``).
    """

    id: str = "all_classified"
    required: bool = True
    unknown_is_reviewed: bool = True

    def evaluate(self, ctx: Context) -> CriterionResult:
        """Met, Unmet naming the packages left, or Blocked (see the class docstring)."""
        pkgs = g.packages(ctx)
        if not pkgs:
            return Unmet("no package in the inventory")
        lic = g.licenses(ctx)
        unknown = {f.content["name"] for f in ctx.get(g.UNKNOWN)}
        reviewed = unknown if self.unknown_is_reviewed else set()
        missing = [n for n in sorted(pkgs) if n not in lic and n not in reviewed]
        if not missing:
            return Met()
        for fact in ctx.get(g.REJECTED):
            c = fact.content
            name = c["content"]["name"] if c.get("key") == g.UNKNOWN else None
            if name in missing and from_human(c.get("reason")) is None:
                return Unmet(
                    f"{name}: rejected by {c.get('by')} with reason "
                    f"{c.get('reason')!r}, which is no SPDX license"
                )
        blocked = [n for n in missing if n in unknown]
        if blocked:
            return Blocked(
                f"{len(blocked)} package(s) need a human classification: " + ", ".join(blocked[:5]),
                approval_ref=f"{g.UNKNOWN}:{blocked[0]}",
            )
        more = f" (+{len(missing) - 5} more)" if len(missing) > 5 else ""
        return Unmet(f"{len(missing)} package(s) unclassified: {', '.join(missing[:5])}{more}")


all_classified = AllClassified()
all_classified_strict = AllClassified(id="all_classified_strict", unknown_is_reviewed=False)


@dataclass
class RisksAssessed:
    """Met once ``copyleft_risk`` assessed the current ``license`` and ``dependency``
    facts (its ``risk.assessed`` summary saw as many as the context holds)."""

    id: str = "risks_assessed"
    required: bool = True

    def evaluate(self, ctx: Context) -> CriterionResult:
        """Met, or Unmet when the last assessment is older than the facts."""
        want = (ctx.count(g.LICENSE), ctx.count(g.DEPENDENCY))
        for fact in ctx.get(g.ASSESSED):
            if (fact.content["licenses"], fact.content["dependencies"]) == want:
                return Met()
        return Unmet("copyleft risks not assessed on the current licenses and dependencies")


risks_assessed = RisksAssessed()


def spdx_value(value: object, content: object) -> dict[str, object]:
    """The ``validate_value`` hook of the ``license.unknown`` gates
    (``converge approve GATE --by NAME --value MIT``).

    ``value`` must be an SPDX expression (or free text the table maps, e.g. "MIT
    License"); the approved ``license.unknown`` content gains ``spdx`` (canonical)
    and ``source: "human"``. Raises ``ValueError`` naming the value otherwise.
    """
    spdx = from_human(value) if isinstance(value, str) else None
    if spdx is None:
        raise ValueError(f"{value!r} is not an SPDX license expression (e.g. MIT, Apache-2.0)")
    base = dict(content) if isinstance(content, dict) else {"content": content}
    return {**base, "spdx": spdx, "source": "human"}
