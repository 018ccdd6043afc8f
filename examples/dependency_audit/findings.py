"""What the audit finds in each policy's scope: policy violations and copyleft.

Both are computed from the context (``license``, ``dependency``, ``package`` and
``policy`` facts) so the invariant and the suggestor that records them as facts
agree. Every finding carries the dependency path from the policy's root.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from engine import Context
from examples.dependency_audit import graph as g
from examples.dependency_audit.policy import policies
from examples.dependency_audit.spdx import canonical, copyleft_strength, unavoidable

Rule = Literal["forbidden", "not allowed"]


@dataclass(frozen=True)
class Finding:
    """One package of a scope: ``rule`` (a violation) or ``copyleft`` ("strong" for
    GPL/AGPL, "weak" for LGPL/MPL/EPL...), with the ``path`` from ``root``."""

    name: str
    version: str
    spdx: str
    root: str
    path: tuple[str, ...]
    license_fact: str
    rule: Rule | None = None
    copyleft: Literal["strong", "weak"] | None = None

    def content(self) -> dict[str, Any]:
        """The content of its ``policy.violation`` or ``risk.copyleft`` fact."""
        kind: dict[str, Any] = (
            {"rule": self.rule} if self.rule is not None else {"copyleft": self.copyleft}
        )
        return {
            "name": self.name,
            "version": self.version,
            "spdx": self.spdx,
            **kind,
            "root": self.root,
            "path": list(self.path),
        }

    def describe(self) -> str:
        """One line: ``lib (GPL-3.0-only, forbidden): app -> lib``."""
        what = self.rule or f"{self.copyleft} copyleft"
        return f"{self.name} ({self.spdx}, {what}): {' -> '.join(self.path)}"


def _ids(values: tuple[str, ...]) -> set[str]:
    return {canonical(v) or v for v in values}


def _outside(allowed: set[str]) -> Callable[[str], bool]:
    return lambda spdx_id: spdx_id not in allowed


def scan(ctx: Context) -> tuple[list[Finding], list[Finding]]:
    """``(violations, copyleft)`` over every policy's scope, by root then package name.

    A violation: a license whose every choice is forbidden, or (allow-list mode)
    has an id outside ``allowed``. Copyleft: a license whose every choice is
    copyleft, a package of the scope other than the root itself.
    """
    lic = g.licenses(ctx)
    pkgs = g.packages(ctx)
    violations: list[Finding] = []
    copyleft: list[Finding] = []
    for policy in policies(ctx):
        forbidden = _ids(policy.forbidden)
        allowed = None if policy.allowed is None else _ids(policy.allowed)
        paths = g.scope_paths(ctx, policy)
        for name in sorted(paths):
            fact = lic.get(name)
            if fact is None:
                continue
            spdx = fact.content["spdx"]
            pkg = pkgs.get(name)
            version = str(pkg.content.get("version", "")) if pkg is not None else ""
            common = (name, version, spdx, policy.root_label, tuple(paths[name]), fact.id)
            if unavoidable(spdx, forbidden.__contains__):
                violations.append(Finding(*common, rule="forbidden"))
            elif allowed is not None and unavoidable(spdx, _outside(allowed)):
                violations.append(Finding(*common, rule="not allowed"))
            strength = copyleft_strength(spdx)
            if strength is not None and name != policy.root:
                copyleft.append(Finding(*common, copyleft=strength))
    return violations, copyleft
