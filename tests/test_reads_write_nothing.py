"""A read writes nothing (issue 53's sweep, issue 56): the inbox's tables (tokens,
groups, votes, run actors, the access log) are made by the first write that needs
them, never by a read, so that a command's first write is its own (a kill -9 after
it leaves what the command meant, tests/test_exactly_once_sweep.py) and a store
opened for reading stays as it was. Tables already there and upgraded are only read.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import inspect

from audit import open_store
from audit.people import (
    access_entries,
    actors_of,
    add_token,
    authenticate,
    groups_of,
    knows,
    list_tokens,
    votes,
)
from audit.store import SqlRunStore
from audit.testing import writes_committed
from tests.faultfixtures import opened
from tests.hitlfixtures import STORES, make_engine, store_url_for

READS: dict[str, Callable[[SqlRunStore], Any]] = {
    "groups_of": lambda s: groups_of(s, "alice"),
    "actors_of": lambda s: actors_of(s, "r1"),
    "knows": lambda s: knows(s, "alice"),
    "authenticate": lambda s: authenticate(s, "cvg_" + "x" * 40),
    "list_tokens": list_tokens,
    "votes": lambda s: votes(s, "g1"),
    "access_entries": access_entries,
}


def _tables(store: SqlRunStore) -> set[str]:
    with store.transaction(write=False) as conn:
        return set(inspect(conn).get_table_names())


@pytest.mark.parametrize("kind", STORES)
def test_reads_of_the_inbox_on_a_store_without_it_answer_empty_and_write_nothing(
    kind: str, tmp_path: Path
) -> None:
    with store_url_for(kind, tmp_path) as url, opened(url) as store:
        make_engine(store, gated=False).run({"seed": [1]})
        before, tables = writes_committed(), _tables(store)
        answers = {name: read(store) for name, read in READS.items()}
        assert writes_committed() == before, "a read committed a write"
        assert _tables(store) == tables and "api_tokens" not in tables
        assert answers["groups_of"] == set() and answers["authenticate"] is None
        assert answers["list_tokens"] == [] and answers["knows"] is False
        add_token(store, "alice")  # the first write that needs them makes them
        assert "api_tokens" in _tables(store)
        assert [t.name for t in list_tokens(store)] == ["alice"]


def test_reads_of_an_inbox_already_upgraded_write_nothing(tmp_path: Path) -> None:
    url = str(tmp_path / "inbox.db")
    store = open_store(url)
    token = add_token(store, "alice")
    store.close()
    store = open_store(url)  # a new process: nothing known about its tables yet
    try:
        before = writes_committed()
        assert authenticate(store, token) is not None
        assert groups_of(store, "alice") == set()
        assert writes_committed() == before
    finally:
        store.close()
