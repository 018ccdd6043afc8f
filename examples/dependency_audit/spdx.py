"""SPDX license identifiers: parse expressions, map free text and classifiers to ids.

A package's license is read, in this order (the first that gives an answer wins):

1. ``License-Expression`` (PEP 639 core metadata): an SPDX expression;
2. ``License``: free text. An SPDX expression is taken as is; common free text
   ("MIT License", "BSD", "Apache 2.0", "Apache Software License", "GPLv3+") is
   mapped by a table; a long license text is read by its first line, then by
   well-known phrases of its body ("Permission is hereby granted, free of charge"
   → MIT);
3. ``License :: ...`` trove classifiers (several are joined with ``AND``: the
   classifiers do not say whether they are alternatives, so assume all apply).

"BSD" without a clause count is taken as ``BSD-3-Clause`` (the common case) and a
GPL without a version as ``GPL-1.0-or-later`` (what SPDX calls "any version").
An expression is copyleft, or forbidden, only when it cannot be avoided: ``A OR
B`` needs both branches, ``A AND B`` either one.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Literal

from examples.dependency_audit.extra import EXTRA_HINT

if TYPE_CHECKING:
    from license_expression import LicenseExpression, Licensing

Source = Literal["license-expression", "license", "classifier", "human"]

COPYLEFT_STRONG = ("GPL-", "AGPL-")
"""Id prefixes of strong copyleft (GPL, AGPL): the whole work that links them is covered."""
COPYLEFT_WEAK = ("LGPL-", "MPL-", "EPL-", "EUPL-", "CDDL-")
"""Id prefixes of weak copyleft (LGPL, MPL, EPL, EUPL, CDDL): the library itself is covered."""
COPYLEFT_FAMILIES = COPYLEFT_STRONG + COPYLEFT_WEAK
"""Id prefixes of the copyleft families this audit reports."""

Strength = Literal["strong", "weak"]

# Free text, after _clean() (lower case; "the", "license", "version" and punctuation gone).
_FREE_TEXT: dict[str, str] = {}
for _spdx, _names in {
    "MIT": "mit|mit expat|expat|mit/expat|mit x11",
    "MIT-0": "mit-0|mit no attribution",
    "BSD-3-Clause": "bsd|bsd-3|bsd 3|bsd3|new bsd|bsd new|modified bsd|revised bsd|"
    "3-clause bsd|bsd 3-clause|bsd three clause|bsd-3-clause",
    "BSD-2-Clause": "simplified bsd|bsd 2-clause|2-clause bsd|bsd-2|bsd 2|bsd2|freebsd",
    "Apache-2.0": "apache|apache 2|apache 2.0|apache-2|apache-2.0|apache v2|apache2|"
    "apache software|apache software 2.0|asl 2.0|asl2|asl 2",
    "ISC": "isc|iscl",
    "PSF-2.0": "psf|psfl|psf-2.0|python software foundation",
    "MPL-2.0": "mpl 2.0|mpl-2.0|mpl2|mpl 2|mpl v2|mozilla public 2.0",
    "GPL-1.0-or-later": "gpl|gnu gpl|gnu general public",
    "GPL-2.0-only": "gplv2|gpl v2|gpl 2|gpl-2|gpl 2.0",
    "GPL-2.0-or-later": "gplv2+|gpl v2+|gpl 2+|gpl-2+|gpl 2.0 or later",
    "GPL-3.0-only": "gplv3|gpl v3|gpl 3|gpl-3|gpl 3.0|gnu gplv3|gnu gpl v3",
    "GPL-3.0-or-later": "gplv3+|gpl v3+|gpl 3+|gpl-3+|gpl 3.0 or later|gnu gplv3+",
    "LGPL-2.0-or-later": "lgpl|gnu lgpl|lgplv2+|lgpl v2+|lgpl 2+",
    "LGPL-2.1-only": "lgplv2.1|lgpl v2.1|lgpl 2.1|lgpl-2.1",
    "LGPL-2.1-or-later": "lgplv2.1+|lgpl v2.1+|lgpl 2.1+|lgpl-2.1+",
    "LGPL-3.0-only": "lgplv3|lgpl v3|lgpl 3|lgpl-3|lgpl 3.0",
    "LGPL-3.0-or-later": "lgplv3+|lgpl v3+|lgpl 3+|lgpl-3+",
    "AGPL-3.0-only": "agpl|agplv3|agpl v3|agpl 3|agpl-3|agpl 3.0|gnu agplv3",
    "AGPL-3.0-or-later": "agplv3+|agpl v3+|agpl 3+|agpl-3+",
    "EPL-2.0": "epl 2.0|epl-2.0|eclipse public 2.0",
    "EPL-1.0": "epl 1.0|epl-1.0|eclipse public 1.0",
    "Unlicense": "unlicense",
    "CC0-1.0": "cc0|cc0 1.0|cc0-1.0",
    "Zlib": "zlib|zlib/libpng",
    "BSL-1.0": "boost|bsl-1.0|boost software 1.0",
    "ZPL-2.1": "zpl 2.1|zpl-2.1|zope public",
    "HPND": "hpnd|historical permission notice and disclaimer",
    "UPL-1.0": "upl|universal permissive 1.0",
    "WTFPL": "wtfpl",
    "LicenseRef-Public-Domain": "public domain",
}.items():
    for _name in _names.split("|"):
        _FREE_TEXT[_name] = _spdx

# The last segment of ``License :: ...`` classifiers that the free-text table misses.
_CLASSIFIERS: dict[str, str] = {
    "mit license": "MIT",
    "bsd license": "BSD-3-Clause",
    "apache software license": "Apache-2.0",
    "mozilla public license 2.0 (mpl 2.0)": "MPL-2.0",
    "mozilla public license 1.1 (mpl 1.1)": "MPL-1.1",
    "isc license (iscl)": "ISC",
    "python software foundation license": "PSF-2.0",
    "gnu general public license (gpl)": "GPL-1.0-or-later",
    "gnu general public license v2 (gplv2)": "GPL-2.0-only",
    "gnu general public license v2 or later (gplv2+)": "GPL-2.0-or-later",
    "gnu general public license v3 (gplv3)": "GPL-3.0-only",
    "gnu general public license v3 or later (gplv3+)": "GPL-3.0-or-later",
    "gnu lesser general public license v2 (lgplv2)": "LGPL-2.0-only",
    "gnu lesser general public license v2 or later (lgplv2+)": "LGPL-2.0-or-later",
    "gnu lesser general public license v3 (lgplv3)": "LGPL-3.0-only",
    "gnu lesser general public license v3 or later (lgplv3+)": "LGPL-3.0-or-later",
    "gnu library or lesser general public license (lgpl)": "LGPL-2.0-or-later",
    "gnu affero general public license v3": "AGPL-3.0-only",
    "gnu affero general public license v3 or later (agplv3+)": "AGPL-3.0-or-later",
    "eclipse public license 1.0 (epl-1.0)": "EPL-1.0",
    "eclipse public license 2.0 (epl-2.0)": "EPL-2.0",
    "european union public licence 1.2 (eupl 1.2)": "EUPL-1.2",
    "the unlicense (unlicense)": "Unlicense",
    "zlib/libpng license": "Zlib",
    "boost software license 1.0 (bsl-1.0)": "BSL-1.0",
    "universal permissive license (upl)": "UPL-1.0",
    "mit no attribution license (mit-0)": "MIT-0",
    "historical permission notice and disclaimer (hpnd)": "HPND",
    "cc0 1.0 universal (cc0 1.0) public domain dedication": "CC0-1.0",
    "public domain": "LicenseRef-Public-Domain",
}


# --- expressions (parsed by license-expression, the ScanCode project's library) ---------
@functools.cache
def _licensing() -> Licensing:
    try:
        from license_expression import get_spdx_licensing
    except ImportError as exc:  # pragma: no cover - the extra is installed by make setup
        raise ImportError(EXTRA_HINT) from exc
    return get_spdx_licensing()


def parse_expression(text: str) -> LicenseExpression:
    """Parse an SPDX license expression: ids of the SPDX license list (any case,
    deprecated ids such as ``GPL-2.0`` and ``+`` suffixes mapped to their current
    form), ``LicenseRef-*``, ``AND``/``OR``/``WITH`` and parentheses.

    Raises ``ValueError`` (with the parser's reason) on anything else.
    """
    from license_expression import ExpressionError

    licensing = _licensing()
    if not text or not text.strip():
        raise ValueError("empty expression")
    try:
        parsed = licensing.parse(text, validate=True, strict=True)
    except ExpressionError as exc:
        # ids the list does not hold are accepted only as LicenseRef-*
        try:
            parsed = licensing.parse(text, validate=False, strict=True)
        except ExpressionError:
            raise ValueError(str(exc)) from exc
        unknown = licensing.unknown_license_keys(parsed)
        if parsed is None or not all(k.lower().startswith("licenseref-") for k in unknown):
            raise ValueError(str(exc)) from exc
    if parsed is None:
        raise ValueError("empty expression")
    expression: LicenseExpression = parsed
    return expression


def canonical(text: str) -> str | None:
    """The canonical SPDX expression for ``text`` (``mit or apache-2.0`` →
    ``MIT OR Apache-2.0``), or None when it is not one."""
    try:
        rendered: str = parse_expression(text).render()
        return rendered
    except ValueError:
        return None


def known_expression(text: object) -> str | None:
    """The canonical form of ``text`` when it is an SPDX expression of ids the SPDX
    license list holds (``mit or apache-2.0`` → ``MIT OR Apache-2.0``), else None:
    ``NOASSERTION``, any ``LicenseRef-*`` (even one license-expression knows), an id
    the list lacks, or no expression at all. What a reviewer may assert without a
    human."""
    from license_expression import ExpressionError

    if not isinstance(text, str) or not text.strip():
        return None
    licensing = _licensing()
    try:
        parsed = licensing.parse(text, validate=True, strict=True)
    except ExpressionError:
        return None
    if parsed is None:
        return None
    if any(k.lower().startswith("licenseref-") for k in licensing.license_keys(parsed)):
        return None
    rendered: str = parsed.render()
    return rendered


def unavoidable(expression: str, predicate: Callable[[str], bool]) -> bool:
    """True when every way to comply with ``expression`` uses an id matching ``predicate``.

    ``A OR B`` lets a user pick, so both must match; ``A AND B`` needs one; ``A
    WITH exception`` is judged by ``A``. An expression that does not parse is
    judged by its words, conservatively.
    """
    try:
        tree = parse_expression(expression)
    except ValueError:
        return any(predicate(w) for w in re.findall(r"[A-Za-z0-9.+-]+", expression))
    return _unavoidable(tree, predicate)


def _unavoidable(node: Any, predicate: Callable[[str], bool]) -> bool:
    from license_expression import AND, OR, LicenseWithExceptionSymbol

    if isinstance(node, OR):
        return all(_unavoidable(a, predicate) for a in node.args)
    if isinstance(node, AND):
        return any(_unavoidable(a, predicate) for a in node.args)
    if isinstance(node, LicenseWithExceptionSymbol):
        return predicate(str(node.license_symbol.key))
    return predicate(str(node.key))


def copyleft_strength_of_id(spdx_id: str) -> Strength | None:
    """``"strong"`` for GPL and AGPL ids, ``"weak"`` for LGPL, MPL, EPL, EUPL and CDDL
    ids, None for the rest."""
    if spdx_id.startswith(COPYLEFT_STRONG):
        return "strong"
    if spdx_id.startswith(COPYLEFT_WEAK):
        return "weak"
    return None


def is_copyleft_id(spdx_id: str) -> bool:
    """True for ids of the copyleft families (:data:`COPYLEFT_FAMILIES`)."""
    return copyleft_strength_of_id(spdx_id) is not None


def is_copyleft(expression: str) -> bool:
    """True when complying with ``expression`` means accepting a copyleft license."""
    return unavoidable(expression, is_copyleft_id)


def copyleft_strength(expression: str) -> Strength | None:
    """The copyleft that complying with ``expression`` cannot avoid: ``"strong"``
    when no choice avoids GPL/AGPL, else ``"weak"`` when none avoids a weak
    copyleft, else None (``MIT OR GPL-3.0-only`` is None: MIT can be chosen)."""
    if unavoidable(expression, lambda i: copyleft_strength_of_id(i) == "strong"):
        return "strong"
    if unavoidable(expression, is_copyleft_id):
        return "weak"
    return None


# --- free text -------------------------------------------------------------------------
def _clean(text: str) -> str:
    t = text.lower().replace("licence", "license")
    t = re.sub(r"[,;:()\"'`]", " ", t)
    words = [w for w in t.split() if w not in ("the", "license", "licensed", "version", "under")]
    return " ".join(words).strip(" .")


def from_free_text(text: str) -> str | None:
    """The SPDX expression for a ``License`` field, or None when it cannot be told.

    Tries, in order: an SPDX expression; the free-text table; ``X or Y`` / ``X/Y``
    with every part in the table; for a long text, its first line, then phrases
    of its body.
    """
    text = text.strip()
    if not text or text.upper() in ("UNKNOWN", "NONE", "OTHER"):
        return None
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) == 1 and len(text) <= 120:
        return _short(text)
    return _short(lines[0]) if len(lines[0]) <= 120 and _short(lines[0]) else _body(text)


def _short(text: str) -> str | None:
    spdx = canonical(text)
    if spdx is not None:
        return spdx
    cleaned = _clean(text)
    if cleaned in _FREE_TEXT:
        return _FREE_TEXT[cleaned]
    # "The MIT License (MIT)", "Mozilla Public License 2.0 (MPL 2.0)": either part
    m = re.fullmatch(r"(.+?)\s*\(([^()]+)\)\s*", text)
    if m is not None:
        for part in m.groups():
            if _clean(part) in _FREE_TEXT:
                return _FREE_TEXT[_clean(part)]
    for op, splitter in (("OR", r"\s+or\s+|\s*/\s*"), ("AND", r"\s+and\s+")):
        parts = [p for p in re.split(splitter, cleaned) if p]
        if len(parts) > 1:
            mapped = [_FREE_TEXT.get(p) or canonical(p) for p in parts]
            if all(mapped):
                return f" {op} ".join(m for m in mapped if m)
    return None


def _body(text: str) -> str | None:
    t = " ".join(text.lower().split())
    later = "any later version" in t

    def versioned(family: str) -> str | None:
        for v in ("3", "2.1", "2"):
            if f"version {v}" in t:
                v = v if "." in v else v + ".0"
                return f"{family}-{v}-{'or-later' if later else 'only'}"
        return None

    if "permission is hereby granted, free of charge" in t:
        return "MIT"
    if "redistribution and use in source and binary forms" in t:
        return "BSD-3-Clause" if "neither the name" in t or "names of its" in t else "BSD-2-Clause"
    if "apache license" in t and "version 2.0" in t:
        return "Apache-2.0"
    if "mozilla public license" in t and "2.0" in t:
        return "MPL-2.0"
    if "gnu affero general public license" in t:
        return "AGPL-3.0-or-later" if later else "AGPL-3.0-only"
    if "gnu lesser general public license" in t:
        return versioned("LGPL")
    if "gnu general public license" in t:
        return versioned("GPL")
    if "permission to use, copy, modify, and/or distribute this software for any purpose" in t:
        return "ISC"
    return None


def from_classifiers(classifiers: Iterable[str]) -> str | None:
    """The SPDX expression for ``License :: ...`` classifiers (joined with AND), or None."""
    found: list[str] = []
    for c in classifiers:
        parts = [p.strip() for p in c.split("::")]
        if len(parts) < 2 or parts[0] != "License" or parts[-1] == "OSI Approved":
            continue
        last = parts[-1]
        spdx = _CLASSIFIERS.get(last.lower()) or _FREE_TEXT.get(_clean(last))
        if spdx is not None and spdx not in found:
            found.append(spdx)
    if not found:
        return None
    if len(found) == 1:
        return found[0]
    return " AND ".join(f"({f})" if " " in f else f for f in found)


def classify(
    license_expression: str | None, license_text: str | None, classifiers: Iterable[str]
) -> tuple[str, Source] | None:
    """``(spdx, source)`` from a package's license metadata, or None (unknown).

    ``source`` is ``"license-expression"``, ``"license"`` or ``"classifier"``; see
    the module docstring for the order.
    """
    if license_expression:
        spdx = canonical(license_expression)
        # PEP 639 expressions are validated by the build tools; keep one we do not know
        return (spdx or license_expression.strip(), "license-expression")
    if license_text:
        spdx = from_free_text(license_text)
        if spdx is not None:
            return (spdx, "license")
    spdx = from_classifiers(classifiers)
    if spdx is not None:
        return (spdx, "classifier")
    return None


def from_human(reason: str | None) -> str | None:
    """The SPDX expression a reviewer gave as a rejection reason, or None.

    Accepts an SPDX expression or anything the free-text table maps ("MIT License").
    """
    if not reason:
        return None
    return _short(reason.strip())
