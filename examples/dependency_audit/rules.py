"""The audit's invariant and criteria (the policy itself: :mod:`.policy`).

Human review (the job gates ``license.unknown`` with a HITL gate):

- **approve** a ``license.unknown`` gate: a person accepts the package as
  reviewed with an unknown license; the fact is promoted and counts as classified.
- **approve** it with ``--value <SPDX id>`` (where the gate has the
  ``spdx_value`` hook, as in vendored.yaml): a person classifies the package; the
  promoted fact carries ``spdx`` and ``source: "human"``, and ``human_review``
  turns it into a ``license`` fact with source ``"human"``, as the report reads.
- **reject** it with ``--reason <SPDX id>`` (or free text the table maps, such as
  "MIT License"): a person classifies the package; ``human_review`` turns the
  engine's ``hitl.rejected`` diagnostic into a ``license`` fact with source
  ``"human"``. A reason that is no license leaves the package unclassified, and
  the run ends with ``CriteriaUnmet`` naming it.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine import Blocked, Context, CriterionResult, Met, Unmet, Violation
from engine.stop import InvariantClass
from examples.dependency_audit import graph as g
from examples.dependency_audit.findings import scan
from examples.dependency_audit.policy import (
    DEFAULT_FORBIDDEN,
    DEFAULT_ROOT,
    ENV_FORBIDDEN,
    ENV_ROOT,
    Policy,
    default_policy,
    policies,
)
from examples.dependency_audit.spdx import from_human

__all__ = [
    "DEFAULT_FORBIDDEN",
    "DEFAULT_ROOT",
    "ENV_FORBIDDEN",
    "ENV_ROOT",
    "AllClassified",
    "NoForbiddenLicense",
    "Policy",
    "RisksAssessed",
    "all_classified",
    "all_classified_strict",
    "default_policy",
    "no_forbidden_license",
    "policies",
    "risks_assessed",
]


class NoForbiddenLicense:
    """Acceptance invariant: no package of a policy's scope has a license the policy
    forbids (or, with an allow-list, one outside it) that it cannot avoid (``MIT OR
    AGPL-3.0-only`` can be used under MIT).

    Checked before the run may end successfully, so every suggestor has run: the
    violation names every offending package with its license and dependency path,
    and ``copyleft_risk`` has recorded each as a ``policy.violation`` fact.
    """

    name = "no_forbidden_license"
    invariant_class = InvariantClass.ACCEPTANCE

    def check(self, ctx: Context) -> Violation | None:
        """Every violation of every policy, in one message; None when there is none."""
        if not ctx.has(g.LICENSE):
            return None
        violations, _ = scan(ctx)
        if not violations:
            return None
        listed = "; ".join(v.describe() for v in violations)
        return Violation(f"{len(violations)} license policy violation(s): {listed}")


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
