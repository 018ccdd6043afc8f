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

import re
from collections.abc import Callable, Iterable
from typing import Literal

Source = Literal["license-expression", "license", "classifier", "human"]

_IDS = [
    "0BSD",
    "AFL-3.0",
    "AGPL-3.0-only",
    "AGPL-3.0-or-later",
    "Apache-1.1",
    "Apache-2.0",
    "Artistic-2.0",
    "BlueOak-1.0.0",
    "BSD-2-Clause",
    "BSD-3-Clause",
    "BSD-3-Clause-Clear",
    "BSL-1.0",
    "CC-BY-4.0",
    "CC0-1.0",
    "CDDL-1.0",
    "EPL-1.0",
    "EPL-2.0",
    "EUPL-1.2",
    "GPL-1.0-or-later",
    "GPL-2.0-only",
    "GPL-2.0-or-later",
    "GPL-3.0-only",
    "GPL-3.0-or-later",
    "HPND",
    "ISC",
    "LGPL-2.0-only",
    "LGPL-2.0-or-later",
    "LGPL-2.1-only",
    "LGPL-2.1-or-later",
    "LGPL-3.0-only",
    "LGPL-3.0-or-later",
    "MIT",
    "MIT-0",
    "MPL-1.1",
    "MPL-2.0",
    "NCSA",
    "OFL-1.1",
    "OpenSSL",
    "PSF-2.0",
    "Python-2.0",
    "Unicode-3.0",
    "Unicode-DFS-2016",
    "Unlicense",
    "UPL-1.0",
    "WTFPL",
    "X11",
    "Zlib",
    "ZPL-2.1",
]
KNOWN_IDS: dict[str, str] = {i.lower(): i for i in _IDS}
"""Common SPDX license ids, by lower-case id (SPDX ids match case-insensitively)."""

_DEPRECATED = {
    "gpl-2.0": "GPL-2.0-only",
    "gpl-2.0+": "GPL-2.0-or-later",
    "gpl-3.0": "GPL-3.0-only",
    "gpl-3.0+": "GPL-3.0-or-later",
    "lgpl-2.0": "LGPL-2.0-only",
    "lgpl-2.0+": "LGPL-2.0-or-later",
    "lgpl-2.1": "LGPL-2.1-only",
    "lgpl-2.1+": "LGPL-2.1-or-later",
    "lgpl-3.0": "LGPL-3.0-only",
    "lgpl-3.0+": "LGPL-3.0-or-later",
    "agpl-3.0": "AGPL-3.0-only",
    "agpl-3.0+": "AGPL-3.0-or-later",
}
_EXCEPTIONS = {
    e.lower(): e for e in ("LLVM-exception", "Classpath-exception-2.0", "GCC-exception-3.1")
}
COPYLEFT_FAMILIES = ("GPL-", "LGPL-", "AGPL-", "MPL-", "EPL-")
"""Id prefixes of the copyleft families this audit reports (GPL, LGPL, AGPL, MPL, EPL)."""

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

# --- expressions ---------------------------------------------------------------------
# An expression tree: ("id", X) | ("with", tree, exception) | ("and"|"or", left, right).
Expr = tuple[object, ...]
_TOKEN = re.compile(r"\s*(\(|\)|[A-Za-z0-9.+:-]+)")


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens: list[str] = []
        pos = 0
        text = text.strip()
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None:
                raise ValueError(f"unexpected {text[pos:]!r}")
            self.tokens.append(m.group(1))
            pos = m.end()
            while pos < len(text) and text[pos].isspace():
                pos += 1
        self.i = 0

    def peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> str:
        tok = self.peek()
        if tok is None:
            raise ValueError("unexpected end of expression")
        self.i += 1
        return tok

    def expr(self) -> Expr:
        left = self.conj()
        while (self.peek() or "").upper() == "OR":
            self.take()
            left = ("or", left, self.conj())
        return left

    def conj(self) -> Expr:
        left = self.atom()
        while (self.peek() or "").upper() == "AND":
            self.take()
            left = ("and", left, self.atom())
        return left

    def atom(self) -> Expr:
        tok = self.take()
        if tok == "(":
            inner = self.expr()
            if self.take() != ")":
                raise ValueError("missing ')'")
            node = inner
        elif tok.upper() in ("AND", "OR", "WITH", ")"):
            raise ValueError(f"unexpected {tok!r}")
        else:
            node = ("id", _canonical_id(tok))
        if (self.peek() or "").upper() == "WITH":
            self.take()
            exc = self.take()
            if exc.lower() not in _EXCEPTIONS:
                raise ValueError(f"unknown license exception {exc!r}")
            node = ("with", node, _EXCEPTIONS[exc.lower()])
        return node


def _canonical_id(token: str) -> str:
    low = token.lower()
    if low in KNOWN_IDS:
        return KNOWN_IDS[low]
    if low in _DEPRECATED:
        return _DEPRECATED[low]
    if low.endswith("+") and low[:-1] in KNOWN_IDS and KNOWN_IDS[low[:-1]].endswith("-only"):
        return KNOWN_IDS[low[:-1]].removesuffix("-only") + "-or-later"
    if re.fullmatch(r"licenseref-[a-z0-9.-]+", low):
        return "LicenseRef-" + token[len("LicenseRef-") :]
    raise ValueError(f"unknown SPDX id {token!r}")


def parse_expression(text: str) -> Expr:
    """Parse an SPDX license expression (ids of :data:`KNOWN_IDS`, ``LicenseRef-*``,
    ``AND``/``OR``/``WITH``, parentheses). Raises ``ValueError`` on anything else."""
    parser = _Parser(text)
    if not parser.tokens:
        raise ValueError("empty expression")
    tree = parser.expr()
    if parser.peek() is not None:
        raise ValueError(f"unexpected {parser.peek()!r}")
    return tree


def render(tree: Expr, top: bool = True) -> str:
    """The canonical text of an expression tree (parentheses only where needed)."""
    op = tree[0]
    if op == "id":
        return str(tree[1])
    if op == "with":
        return f"{render(tree[1], False)} WITH {tree[2]}"  # type: ignore[arg-type]
    left, right = tree[1], tree[2]
    text = f"{render(left, False)} {str(op).upper()} {render(right, False)}"  # type: ignore[arg-type]
    return text if top else f"({text})"


def canonical(text: str) -> str | None:
    """The canonical SPDX expression for ``text``, or None when it is not one."""
    try:
        return render(parse_expression(text))
    except ValueError:
        return None


def unavoidable(expression: str, predicate: Callable[[str], bool]) -> bool:
    """True when every way to comply with ``expression`` uses an id matching ``predicate``.

    ``A OR B`` lets a user pick, so both must match; ``A AND B`` needs one.
    An expression that does not parse is judged by its words, conservatively.
    """
    try:
        tree = parse_expression(expression)
    except ValueError:
        return any(predicate(w) for w in re.findall(r"[A-Za-z0-9.+-]+", expression))
    return _unavoidable(tree, predicate)


def _unavoidable(tree: Expr, predicate: Callable[[str], bool]) -> bool:
    op = tree[0]
    if op == "id":
        return predicate(str(tree[1]))
    if op == "with":
        return _unavoidable(tree[1], predicate)  # type: ignore[arg-type]
    left = _unavoidable(tree[1], predicate)  # type: ignore[arg-type]
    right = _unavoidable(tree[2], predicate)  # type: ignore[arg-type]
    return (left and right) if op == "or" else (left or right)


def is_copyleft_id(spdx_id: str) -> bool:
    """True for ids of the GPL, LGPL, AGPL, MPL and EPL families."""
    return spdx_id.startswith(COPYLEFT_FAMILIES)


def is_copyleft(expression: str) -> bool:
    """True when complying with ``expression`` means accepting a copyleft license."""
    return unavoidable(expression, is_copyleft_id)


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
