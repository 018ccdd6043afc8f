"""The failed-sign-in limit is the store's, so every server of one store counts a
client's failures together (issue 54): two real ``converge serve`` of one PostgreSQL
behind one real nginx (``--forwarded-allow-ips 127.0.0.1``), wrong tokens sent
through the proxy, whichever server answers each."""

from __future__ import annotations

from pathlib import Path

import httpx

from audit.people import access_entries, add_token
from tests.faultfixtures import opened
from tests.hitlfixtures import store_url_for
from tests.pgfixtures import require_pg
from tests.proxyfixtures import nginx_in_front
from tests.realserve import served_cli

ATTACKER = "203.0.113.7"
OTHER = "198.51.100.9"


def test_wrong_tokens_through_a_proxy_are_limited_together_whichever_server_answers(
    tmp_path: Path,
) -> None:
    require_pg()
    with store_url_for("postgresql", tmp_path) as url, opened(url) as store:
        right = add_token(store, "alice", "viewer")
        behind = ("--forwarded-allow-ips", "127.0.0.1")
        with (
            served_cli(url, tmp_path / "one.log", *behind) as one,
            served_cli(url, tmp_path / "two.log", *behind) as two,
            nginx_in_front([one.base, two.base], tmp_path) as proxy,
        ):

            def get(token: str, client: str) -> httpx.Response:
                headers = {"Authorization": f"Bearer {token}", "X-Forwarded-For": client}
                return httpx.get(proxy + "/api/gates", headers=headers, timeout=30)

            wrong = [get(f"cvg_wrong{i}", ATTACKER).status_code for i in range(12)]
            blocked = get(right, ATTACKER)
            other = get(right, OTHER)
            answered = [s.output().count("GET /api/gates") for s in (one, two)]

        assert wrong[:10] == [401] * 10 and wrong[10:] == [429, 429]
        assert blocked.status_code == 429 and 1 <= int(blocked.headers["Retry-After"]) <= 60
        assert other.status_code == 200  # another client is not limited
        assert all(n >= 5 for n in answered), answered  # both servers answered their share
        failures = [e for e in access_entries(store) if e.outcome == "401"]
        assert {e.client for e in failures} == {ATTACKER} and len(failures) == 10
