"""The audit's policy: what is audited (the scope) and which licenses it accepts.

A run's policies are its ``policy`` facts (``initial: {policy: [{...}]}`` in the
job file), each an object with these fields, all optional:

============== ==================================================================
``root``       the package whose runtime closure is audited; ``null``: the whole
               environment (default ``$CONVERGE_AUDIT_ROOT``, else ``converge-engine``)
``extras``     the root's extras whose requirements count too (``[web, agents]``)
``tools``      true to audit pip, setuptools and wheel too (left out by default:
               installers, not run-time dependencies)
``forbidden``  SPDX ids no package of the scope may have (default
               ``$CONVERGE_AUDIT_FORBIDDEN``, comma-separated, else
               ``AGPL-3.0-only, AGPL-3.0-or-later``)
``allowed``    allow-list mode: SPDX ids a package must be usable under; any other
               license is a finding (``rule: not allowed``)
============== ==================================================================

A license is judged by what cannot be avoided: ``MIT OR AGPL-3.0-only`` is usable
under MIT, so it is neither forbidden nor outside an allow-list holding MIT.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from engine import Context

POLICY = "policy"
DEFAULT_ROOT = "converge-engine"
DEFAULT_FORBIDDEN = ("AGPL-3.0-only", "AGPL-3.0-or-later")
ENV_ROOT = "CONVERGE_AUDIT_ROOT"
ENV_FORBIDDEN = "CONVERGE_AUDIT_FORBIDDEN"
TOOLS = frozenset({"pip", "setuptools", "wheel"})
"""Installers left out of a scope unless a policy says ``tools: true``."""
ENVIRONMENT = "(environment)"
"""How a whole-environment scope's root is shown in findings."""


@dataclass(frozen=True)
class Policy:
    """One policy (see the module docstring): ``root`` None audits the whole environment."""

    root: str | None
    forbidden: tuple[str, ...]
    allowed: tuple[str, ...] | None = None
    extras: tuple[str, ...] = ()
    tools: bool = False

    @property
    def root_label(self) -> str:
        """The root's name, or ``(environment)``."""
        return self.root if self.root is not None else ENVIRONMENT

    @staticmethod
    def from_content(content: Any, base: Policy | None = None) -> Policy:
        """A policy from a ``policy`` fact's content; missing fields from ``base``
        (default: :func:`default_policy`)."""
        base = base or default_policy()
        c = content if isinstance(content, dict) else {}
        root = c.get("root", base.root)  # an explicit null: the whole environment
        forbidden = c.get("forbidden")
        allowed = c.get("allowed")
        return Policy(
            root=None if root is None else str(root),
            forbidden=tuple(forbidden) if forbidden else base.forbidden,
            allowed=None if allowed is None else tuple(allowed),
            extras=tuple(c.get("extras") or ()),
            tools=bool(c.get("tools", False)),
        )


def default_policy() -> Policy:
    """The policy of the environment variables, else the defaults."""
    root = os.environ.get(ENV_ROOT, "").strip() or DEFAULT_ROOT
    env = [f.strip() for f in os.environ.get(ENV_FORBIDDEN, "").split(",") if f.strip()]
    return Policy(root, tuple(env) if env else DEFAULT_FORBIDDEN)


def policies(ctx: Context) -> list[Policy]:
    """The policies of the ``policy`` facts, or the default policy alone."""
    base = default_policy()
    return [Policy.from_content(f.content, base) for f in ctx.get(POLICY)] or [base]
