"""Installed distributions and their requirements, read with ``importlib.metadata``.

:class:`Distribution` is the part of a distribution's core metadata the audit
uses; :func:`installed_distributions` reads the environment it runs in. Tests and
other jobs hand :class:`~examples.dependency_audit.suggestors.Inventory` any other
source of :class:`Distribution` values.

Requirements (``Requires-Dist``) and their environment markers are parsed and
evaluated with ``packaging`` (the PyPA's library, in the ``examples`` extra).
:func:`closure` is the runtime closure of a root package, with the extras asked for.
"""

from __future__ import annotations

import importlib.metadata
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from examples.dependency_audit.extra import EXTRA_HINT

LICENSE_TEXT_LIMIT = 2000
"""Characters of a ``License`` field kept in a ``package`` fact (enough for its heuristics)."""


def normalise_name(name: str) -> str:
    """The PEP 503 normalised name: lower case, runs of ``-_.`` as one ``-``."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Distribution:
    """The metadata of one distribution the audit reads.

    ``name`` is normalised (PEP 503); ``license_expression`` and ``license`` are the
    ``License-Expression`` and ``License`` fields (None when absent);
    ``classifiers`` are the ``License :: ...`` trove classifiers; ``requires`` the
    ``Requires-Dist`` lines, as written.
    """

    name: str
    version: str
    license_expression: str | None = None
    license: str | None = None
    classifiers: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()

    def to_content(self) -> dict[str, Any]:
        """The JSON content of this distribution's ``package`` fact."""
        text = self.license
        if text is not None and len(text) > LICENSE_TEXT_LIMIT:
            text = text[:LICENSE_TEXT_LIMIT]
        return {
            "name": normalise_name(self.name),
            "version": self.version,
            "license_expression": self.license_expression,
            "license": text,
            "classifiers": list(self.classifiers),
            "requires": list(self.requires),
        }

    @staticmethod
    def from_content(content: dict[str, Any]) -> Distribution:
        """Rebuild a distribution from a ``package`` fact's content."""
        return Distribution(
            name=content["name"],
            version=content["version"],
            license_expression=content.get("license_expression"),
            license=content.get("license"),
            classifiers=tuple(content.get("classifiers", ())),
            requires=tuple(content.get("requires", ())),
        )


def installed_distributions() -> list[Distribution]:
    """Every distribution installed where this runs, sorted by normalised name.

    A name found twice (an editable install next to its egg-info) keeps the first
    found, as ``importlib.metadata.distribution(name)`` does.
    """
    seen: dict[str, Distribution] = {}
    for dist in importlib.metadata.distributions():
        md = dist.metadata
        raw_name = md["Name"]
        if not raw_name:
            continue
        name = normalise_name(raw_name)
        if name in seen:
            continue
        seen[name] = Distribution(
            name=name,
            version=dist.version or "",
            license_expression=_field(md, "License-Expression"),
            license=_field(md, "License"),
            classifiers=tuple(
                c for c in (md.get_all("Classifier") or []) if c.startswith("License ::")
            ),
            requires=tuple(dist.requires or ()),
        )
    return [seen[n] for n in sorted(seen)]


def _field(md: importlib.metadata.PackageMetadata, name: str) -> str | None:
    values = md.get_all(name)
    return str(values[0]) if values and values[0] else None


# --- requirements -----------------------------------------------------------------------
@dataclass(frozen=True)
class Requirement:
    """One parsed ``Requires-Dist`` line: normalised ``name``, requested ``extras``
    and its ``marker`` (a ``packaging.markers.Marker``, or None)."""

    name: str
    extras: frozenset[str]
    marker: Any

    def applies(self, extra: str = "") -> bool:
        """True when the requirement applies here, to the distribution installed with
        ``extra`` (``""``: without extras)."""
        return self.marker is None or bool(self.marker.evaluate({"extra": extra}))


def parse_requirement(line: str) -> Requirement | None:
    """Parse one ``Requires-Dist`` line with ``packaging``; None when it is invalid.

    Raises ``ImportError`` naming the ``examples`` extra when ``packaging`` is missing.
    """
    try:
        from packaging.requirements import InvalidRequirement
        from packaging.requirements import Requirement as PackagingRequirement
    except ImportError as exc:  # pragma: no cover - the extra is installed by make setup
        raise ImportError(EXTRA_HINT) from exc
    try:
        req = PackagingRequirement(line)
    except InvalidRequirement:
        return None
    return Requirement(normalise_name(req.name), frozenset(req.extras), req.marker)


def requirement_targets(
    name: str, packages: dict[str, Distribution], extras: Iterable[str] = ()
) -> Iterator[str]:
    """The names ``name`` depends on directly, in ``Requires-Dist`` order, once each.

    With ``extras``, also what ``name`` pulls in when installed with those extras
    (``converge-engine[web]``).

    Requirements that apply only to one of ``name``'s own extras are skipped, as are
    those whose marker is false here. A requirement with extras (``psycopg[binary]``)
    also brings the requirements of those extras of the target (recursively), as
    dependencies of ``name``: the one who asks for an extra depends on what it pulls in.
    """
    pkg = packages.get(name)
    if pkg is None:
        return
    seen: set[str] = {name}
    queue: list[tuple[str, frozenset[str]]] = []
    for req in _parsed(pkg.requires):
        if not req.applies(""):
            continue
        if req.name not in seen:
            seen.add(req.name)
            yield req.name
        if req.extras:
            queue.append((req.name, req.extras))
    if extras:
        queue.insert(0, (name, frozenset(normalise_name(e) for e in extras)))
    expanded: set[tuple[str, str]] = set()
    while queue:
        target, extras = queue.pop(0)
        dist = packages.get(target)
        if dist is None:
            continue
        for extra in sorted(extras):
            if (target, extra) in expanded:
                continue
            expanded.add((target, extra))
            for req in _parsed(dist.requires):
                if req.applies("") or not req.applies(extra):
                    continue  # base requirements are the target's own edges
                if req.name not in seen:
                    seen.add(req.name)
                    yield req.name
                if req.extras:
                    queue.append((req.name, req.extras))


def _parsed(lines: Iterable[str]) -> Iterator[Requirement]:
    for line in lines:
        req = parse_requirement(line)
        if req is not None:
            yield req


def closure(root: str, packages: dict[str, Distribution], extras: Iterable[str] = ()) -> list[str]:
    """``root`` and every installed package it needs at run time (with ``extras``),
    in breadth-first order; empty when ``root`` is not installed."""
    root = normalise_name(root)
    if root not in packages:
        return []
    order = [root]
    seen = {root}
    i = 0
    while i < len(order):
        name = order[i]
        for target in requirement_targets(name, packages, extras if name == root else ()):
            if target in packages and target not in seen:
                seen.add(target)
                order.append(target)
        i += 1
    return order
