"""Sign-in limits count per connection, not per claimed address (issue 40): a client
cannot escape the limit by sending a new ``X-Forwarded-For`` with each guess, nor
lock another address out by claiming it; behind a proxy the operator lists
(``converge serve --forwarded-allow-ips``), the proxy's header names the client.
Served by uvicorn on 127.0.0.1 with the settings ``converge serve`` uses."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from audit.people import access_entries, add_token
from audit.store import SqlRunStore
from tests.faultfixtures import opened
from tests.webfixtures import served

GUESSES = 20


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[SqlRunStore]:
    with opened(str(tmp_path / "inbox.db")) as store:
        yield store


def _guess(base: str, i: int, claimed: str) -> int:
    answer = httpx.get(
        f"{base}/api/gates",
        headers={"Authorization": f"Bearer cvg_wrong{i}", "X-Forwarded-For": claimed},
    )
    return answer.status_code


def test_wrong_tokens_under_ever_new_forwarded_addresses_are_still_limited(
    sqlite_store: SqlRunStore,
) -> None:
    with served(sqlite_store) as base:
        codes = [_guess(base, i, f"203.0.113.{i}") for i in range(GUESSES)]

    assert codes[:10] == [401] * 10 and set(codes[10:]) == {429}
    clients = {e.client for e in access_entries(sqlite_store)}
    assert clients == {"127.0.0.1"}  # the peer, never a claimed address


def test_claiming_someone_elses_address_does_not_lock_them_out(
    sqlite_store: SqlRunStore,
) -> None:
    right = add_token(sqlite_store, "alice")
    with served(sqlite_store) as base:
        for i in range(GUESSES):
            _guess(base, i, "198.51.100.7")  # an attacker on 127.0.0.1 claims .7
        # the real 198.51.100.7 would come through its own connection; here the
        # attacker's own peer address is what is over the limit, whatever it claims
        claimed = httpx.get(
            f"{base}/api/gates",
            headers={"Authorization": f"Bearer {right}", "X-Forwarded-For": "192.0.2.1"},
        )
    assert claimed.status_code == 429


@pytest.mark.parametrize("trusted", ["127.0.0.1", "*"])
def test_a_listed_proxy_names_the_client_and_each_client_has_its_own_limit(
    sqlite_store: SqlRunStore, trusted: str
) -> None:
    right = add_token(sqlite_store, "alice")
    with served(sqlite_store, forwarded_allow_ips=trusted) as base:
        codes = [_guess(base, i, "198.51.100.7") for i in range(12)]
        other = httpx.get(
            f"{base}/api/gates",
            headers={"Authorization": f"Bearer {right}", "X-Forwarded-For": "192.0.2.1"},
        )
    assert codes[:10] == [401] * 10 and codes[10:] == [429, 429]
    assert other.status_code == 200
    clients = {e.client for e in access_entries(sqlite_store)}
    assert "198.51.100.7" in clients and "127.0.0.1" not in clients
