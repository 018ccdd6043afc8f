"""Tables that fit the terminal, as ``gh`` and ``kubectl`` print theirs.

A table is described by its :class:`Column` specs and plain-text rows. At a given
width (the terminal's, or ``$COLUMNS``) :func:`fitted_table` keeps every column
whose cells fit; when the row is too wide it drops the columns of lowest priority
first (the highest ``priority`` number), and names them in the caption. Columns of
priority 0 are always shown. A ``whole`` column (ids, stop kinds: what a user
copies) is never wrapped or cut; the others fold, never below their header or
``floor`` characters, so no header reads ``depe…``. Nothing is ever cut: a value
too long for its column folds onto the next line.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.cells import cell_len

from converge.cli.markup import escape

if TYPE_CHECKING:  # built where a table goes through rich (plain_table: none)
    from rich.console import JustifyMethod
    from rich.table import Table

__all__ = [
    "Column",
    "fitted_table",
    "kept_columns",
    "natural_width",
    "plain_table",
    "table_width",
    "word_widths",
]

BORDER = 3
"""Characters a column adds to a row besides its cells: a padding space on each
side and one vertical rule (rich's default box); the row adds one more rule."""


@dataclass(frozen=True, slots=True)
class Column:
    """One column of a fitted table.

    ``priority``: 0 = always shown; the columns with the highest number are dropped
    first when the table is too wide. ``whole``: the column is as wide as its widest
    cell and never wraps (ids, kinds). ``floor``: the narrowest (characters) a
    folding column may become. An ``optional`` column is left out when every
    row's cell in it is empty.
    """

    header: str
    priority: int = 0
    whole: bool = False
    justify: JustifyMethod = "left"
    floor: int = 12
    optional: bool = False


def _widest(cells: Sequence[str]) -> int:
    return max((cell_len(line) for cell in cells for line in cell.splitlines()), default=0)


def _need(column: Column, cells: Sequence[str]) -> int:
    """The narrowest the column may be (characters): its header whole, and its
    widest cell whole (``whole``) or up to ``floor``."""
    widest = _widest(cells)
    return max(cell_len(column.header), widest if column.whole else min(widest, column.floor))


def table_width(needs: Sequence[int]) -> int:
    """The width (characters) of a table whose columns are ``needs`` wide."""
    return sum(needs) + BORDER * len(needs) + 1


def natural_width(columns: Sequence[Column], rows: Sequence[Sequence[str]]) -> int:
    """The width (characters) a table of ``rows`` takes with no limit, each column as
    wide as its header or widest cell: what rich would measure, or more."""
    wants = [
        max(cell_len(c.header), _widest([row[i] for row in rows])) for i, c in enumerate(columns)
    ]
    return table_width(wants)


def fitted_table(
    title: str,
    columns: Sequence[Column],
    rows: Sequence[Sequence[str]],
    width: int | None,
) -> Table:
    """A rich table of ``rows`` (plain text, escaped here) that fits ``width``
    characters (None: no limit, every column shown). Columns are dropped, lowest
    priority first, until the others fit; the caption names those dropped."""
    from rich.table import Table

    cells = [[row[i] for row in rows] for i in range(len(columns))]
    keep = kept_columns(columns, rows)
    needs = {i: _need(columns[i], cells[i]) for i in keep}
    dropped: list[str] = []
    while width is not None and table_width([needs[i] for i in keep]) > width:
        droppable = [i for i in keep if columns[i].priority > 0]
        if not droppable:
            break  # the columns that must stay fold to fit
        # the lowest priority (highest number), the rightmost of those first
        worst = max(droppable, key=lambda i: (columns[i].priority, i))
        keep.remove(worst)
        dropped.append(columns[worst].header)
    caption = None
    if dropped:
        caption = f"not shown at {width} columns: {', '.join(dropped)} (--json has every field)"
    table = Table(
        title=escape(title), title_justify="left", caption=caption, caption_justify="left"
    )
    widths = _widths(
        [needs[i] for i in keep],
        [max(cell_len(columns[i].header), _widest(cells[i])) for i in keep],
        width,
    )
    for n, i in enumerate(keep):
        c = columns[i]
        table.add_column(
            escape(c.header),
            justify=c.justify,
            no_wrap=c.whole and widths is not None,
            overflow="fold",
            width=None if widths is None else widths[n],
        )
    for row in rows:
        table.add_row(*(escape(row[i]) for i in keep))
    return table


def kept_columns(columns: Sequence[Column], rows: Sequence[Sequence[str]]) -> list[int]:
    """The indexes of the columns a table of ``rows`` shows with no width limit: all
    but an ``optional`` one no row has a value in."""
    return [
        i
        for i, c in enumerate(columns)
        if not (c.optional and rows and not any(row[i].strip() for row in rows))
    ]


_PLAIN = re.compile(r"[ -\[\]-~]*")
"""A line a plain table prints as it is: printable ASCII (no tab, no control character)
but the backslash (rich's ``escape`` and markup do not give every one back as it was)."""
_EMOJI = re.compile(r":\S*?:")
"""What rich might take for an emoji code (``:smile:``): such a cell is left to rich."""


def plain_table(title: str, columns: Sequence[Column], rows: Sequence[Sequence[str]]) -> str | None:
    """The text rich prints for :func:`fitted_table` ``(title, columns, rows, None)`` on
    a console without colours (rich's default box, every column as wide as its widest
    line, a cell of several lines as many lines), built without rich: printing 100
    rows through rich's renderer cost as much as a listing's query and imports. None
    when rich might print it otherwise: no rows or columns, no title or one wider
    than the table, a text that is not printable ASCII or holds a backslash, a line
    with spaces at either end (rich strips some), something rich could read as an
    emoji code, a column centred."""
    if (
        not rows
        or not columns
        or not title
        or any(c.justify not in ("left", "right") for c in columns)
    ):
        return None
    texts = [title, *(c.header for c in columns)]
    cells = [[cell.split("\n") for cell in row] for row in rows]
    for text in texts:
        if "\n" in text or not _plain(text):
            return None
    for row in cells:
        for lines in row:
            if not all(_plain(line) for line in lines):
                return None
    widths = [
        max(len(c.header), *(len(line) for row in cells for line in row[i]))
        for i, c in enumerate(columns)
    ]
    total = table_width(widths)
    if len(title) > total:
        return None
    out = [title.ljust(total), _rule("┏", "━", "┳", "┓", widths)]
    out.append(_line("┃", [[c.header] for c in columns], columns, widths, 0))
    out.append(_rule("┡", "━", "╇", "┩", widths))
    for row in cells:
        out.extend(_line("│", row, columns, widths, n) for n in range(max(map(len, row))))
    out.append(_rule("└", "─", "┴", "┘", widths))
    return "\n".join(out) + "\n"


def _plain(text: str) -> bool:
    return (
        _PLAIN.fullmatch(text) is not None and text == text.strip() and _EMOJI.search(text) is None
    )


def _rule(left: str, fill: str, cross: str, right: str, widths: Sequence[int]) -> str:
    return left + cross.join(fill * (w + 2) for w in widths) + right


def _line(
    edge: str,
    cells: Sequence[Sequence[str]],
    columns: Sequence[Column],
    widths: Sequence[int],
    n: int,
) -> str:
    """Line ``n`` of a row whose cells are ``cells`` (each its lines)."""
    parts = []
    for lines, c, w in zip(cells, columns, widths, strict=True):
        text = lines[n] if n < len(lines) else ""
        parts.append(text.rjust(w) if c.justify == "right" else text.ljust(w))
    return edge + edge.join(f" {p} " for p in parts) + edge


def _widths(needs: list[int], wants: list[int], width: int | None) -> list[int] | None:
    """Each column's width: what it ``wants`` (its widest cell) when all fit in
    ``width``, else its ``need`` plus a share of the room left, in proportion to
    what it wants more. None when there is no limit (each takes its widest cell) or
    when even the needs do not fit (rich then folds every column)."""
    if width is None or table_width(needs) > width:
        return None
    if table_width(wants) <= width:
        return wants
    room = width - table_width(needs)
    more = [w - n for n, w in zip(needs, wants, strict=True)]
    total = sum(more)
    given = [min(m, room * m // total) for m in more]
    left = room - sum(given)
    # the rounding's leftover, one character each, to the columns that want the most
    for i in sorted(range(len(more)), key=lambda i: more[i] - given[i], reverse=True):
        if left <= 0:
            break
        if given[i] < more[i]:
            given[i] += 1
            left -= 1
    return [n + g for n, g in zip(needs, given, strict=True)]


_BREAKS = re.compile(r"\s+|(?<=-)")


def _longest_piece(cells: Sequence[str]) -> int:
    """The longest run of a column's text that has no space and no hyphen to
    break after (characters): the narrowest the column may be without breaking
    a word."""
    return max((cell_len(piece) for cell in cells for piece in _BREAKS.split(cell)), default=0)


def word_widths(
    headers: Sequence[str], rows: Sequence[Sequence[str]], width: int
) -> list[int] | None:
    """Column widths (characters) for ``rows`` at ``width`` characters where no
    word breaks: each column at least its header and its longest piece between
    spaces and hyphens, the room left shared in proportion to what each wants
    more; None when even that does not fit (rich then folds: the last resort)."""
    cells = [[row[i] for row in rows] for i in range(len(headers))]
    needs = [max(cell_len(h), _longest_piece(c)) for h, c in zip(headers, cells, strict=True)]
    wants = [max(cell_len(h), _widest(c)) for h, c in zip(headers, cells, strict=True)]
    return _widths(needs, wants, width)


def wrap_words(text: str, width: int) -> str:
    """``text`` wrapped to ``width`` characters at spaces and after hyphens
    (``license-`` / ``expression``), a word cut only when it has no such break."""
    lines = textwrap.wrap(text, width, break_on_hyphens=True) if text else [""]
    return "\n".join(lines) if cell_len(text) > width else text
