"""Hypothesis strategies and odd JSON values the property tests share."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st


def json_trees(
    leaves: st.SearchStrategy[Any], *, key_size: int, max_leaves: int
) -> st.SearchStrategy[Any]:
    """``leaves`` and lists (up to 3 items) and dicts (up to 3 keys of at most
    ``key_size`` characters) of them, nested, with at most ``max_leaves`` leaves."""
    return st.recursive(
        leaves,
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(st.text(max_size=key_size), inner, max_size=3)
        ),
        max_leaves=max_leaves,
    )


def nested_dicts(levels: int) -> dict[str, Any]:
    """``{"a": {"a": ... {}}}``, ``levels`` dicts deep."""
    root: dict[str, Any] = {}
    cur = root
    for _ in range(levels):
        cur["a"] = {}
        cur = cur["a"]
    return root
