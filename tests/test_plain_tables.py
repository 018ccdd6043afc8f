"""A table printed to a pipe is built without rich's renderer (converge.cli.tables.
plain_table): the text must be rich's, byte for byte, or rich prints it."""

from __future__ import annotations

import io

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from converge.cli.runs_table import RUN_COLUMNS
from converge.cli.tables import Column, fitted_table, kept_columns, plain_table


def _rich(title: str, columns: list[Column], rows: list[list[str]]) -> str:
    """What converge.cli.render.print_table prints for a piped table (no colours)."""
    buf = io.StringIO()
    console = Console(file=buf, width=100_000, color_system=None, highlight=False)
    console.print(fitted_table(title, columns, rows, None), crop=False)
    return buf.getvalue()


def _plain(title: str, columns: list[Column], rows: list[list[str]]) -> str | None:
    keep = kept_columns(columns, rows)
    return plain_table(title, [columns[i] for i in keep], [[r[i] for i in keep] for r in rows])


# printable ASCII mostly, with what rich treats apart: markup and its escapes,
# emoji codes, tabs, spaces at the ends, other scripts, wide characters, line breaks
TOKENS = [*"abcXYZ019 -_.,/[]()=#@<>{}|~!?$%&+;'\"\n", "[bold]", "[/]", "[red]x[/red]"]
RARE = [":", ":smile:", "\\", "\t", "é", "漢", "\x07"]
TEXT = st.lists(st.one_of(st.sampled_from(TOKENS), st.sampled_from(RARE)), max_size=8).map("".join)


@settings(max_examples=500, deadline=None)
@given(
    title=TEXT,
    spec=st.lists(
        st.tuples(TEXT, st.sampled_from(["left", "right", "center"]), st.booleans()),
        min_size=1,
        max_size=5,
    ),
    data=st.data(),
)
def test_a_plain_table_is_the_text_rich_prints_or_none(
    title: str, spec: list[tuple[str, str, bool]], data: st.DataObject
) -> None:
    columns = [Column(h, justify=j, optional=o) for h, j, o in spec]  # type: ignore[arg-type]
    rows = data.draw(st.lists(st.lists(TEXT, min_size=len(spec), max_size=len(spec)), max_size=6))
    plain = _plain(title, columns, rows)
    if plain is not None:
        assert plain == _rich(title, columns, rows)


def test_a_listing_of_runs_is_built_without_rich() -> None:
    """The rows `converge runs` prints (ids, kinds, times, counts) take the plain path."""
    rest = ["c1-licenses", "stopped", "converged", "", "success", "1", "6", "12-02 10:54", "6", ""]
    rows = [[f"{i:016x}", *rest] for i in range(100)]
    plain = _plain("runs (100)", list(RUN_COLUMNS), rows)
    assert plain is not None
    assert plain == _rich("runs (100)", list(RUN_COLUMNS), rows)
