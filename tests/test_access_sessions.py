"""Sessions and people (issue 54, docs/access.md): a revoked or expired token ends the
streams it opened within a second or two, through the real ``converge serve``; a
comment is made by a known person, with a token where tokens are required, who may
read the gate, through the real ``converge comment``; on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from audit.people import access_entries, list_tokens
from audit.store import SqlRunStore
from tests.accessfixtures import Scene, build_scene, counts
from tests.faultfixtures import CliOutcome, opened, run_cli
from tests.hitlfixtures import STORES, store_url_for
from tests.realserve import served_cli
from tests.servicefixtures import until


# -- a revoked or expired token ends the streams it opened ----------------------------
@dataclass
class Following:
    """A stream read in a thread: the events' kinds as they come, and when it ended."""

    kinds: list[str]
    ended: threading.Event
    ended_at: list[float]


def _follow(base: str, token: str, run_id: str) -> Following:
    got = Following([], threading.Event(), [])

    def read() -> None:
        headers = {"Authorization": f"Bearer {token}"}
        try:
            with httpx.stream(
                "GET", f"{base}/api/runs/{run_id}/events", headers=headers, timeout=60
            ) as answer:
                for line in answer.iter_lines():
                    if line.startswith("event: "):
                        got.kinds.append(line.removeprefix("event: "))
        except httpx.HTTPError:
            pass
        got.ended_at.append(time.time())
        got.ended.set()

    threading.Thread(target=read, daemon=True).start()
    return got


@pytest.fixture(params=STORES)
def staged(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Scene, SqlRunStore]]:
    """The people and runs of :func:`build_scene` in a fresh store of each kind, which
    stays open for the test."""
    with store_url_for(request.param, tmp_path) as url, opened(url) as store:
        yield build_scene(url, tmp_path), store


# alone: "within two seconds" is a time of the CPU the server is given
@pytest.mark.serial
def test_a_revoked_or_expired_token_ends_the_stream_it_opened_within_two_seconds(
    staged: tuple[Scene, SqlRunStore], tmp_path: Path
) -> None:
    scene, store = staged
    url = scene.url
    with served_cli(url, tmp_path / "serve.log") as served:
        add = ["token", "add", "temp", "--role", "viewer", "--expires", "20s", "--db", url]
        short = run_cli(add)
        assert short.returncode == 0, short
        paused = scene.runs["open"]  # its stream stays open: the run waits on its gate
        revoked = _follow(served.base, scene.tokens["victor"], paused)
        expiring = _follow(served.base, short.stdout.split()[-1], paused)
        kept = _follow(served.base, scene.tokens["alice"], paused)
        streams = (revoked, expiring, kept)
        until(
            lambda: all("run_paused" in f.kinds for f in streams),
            timeout=30,
            what=lambda: str(streams),
        )

        done = run_cli(["token", "revoke", "victor", "--db", url])
        at = time.time()

        assert done.returncode == 0, done
        assert revoked.ended.wait(10), "the revoked token's stream is still open"
        assert revoked.ended_at[0] - at < 2.0
        assert expiring.ended.wait(40), "the expired token's stream is still open"
        [expiry] = [t.expires_at for t in list_tokens(store) if t.name == "temp"]
        assert expiry is not None and 0 <= expiring.ended_at[0] - expiry < 2.0
        assert not kept.ended.is_set()  # another person's stream goes on


# -- comments: a known person, proven where tokens are required, who may read the gate --
def test_a_comment_is_made_by_a_known_person_with_a_token_where_required(
    staged: tuple[Scene, SqlRunStore],
) -> None:
    scene, store = staged
    url = scene.url
    gate = scene.gates["restricted"]

    def comment(*args: str) -> CliOutcome:
        return run_cli(["comment", gate, "a note", "--db", url, *args])

    assert run_cli(["user", "add", "lena", "--group", "legal", "--db", url]).returncode == 0
    unknown = comment("--by", "nobody-real")  # people are registered: auto needs tokens
    assert run_cli(["config", "set", "require-token", "true", "--db", url]).returncode == 0
    untokened = comment("--by", "lena")
    outsider = comment("--token", scene.tokens["oscar"])  # may not read the gate
    before = counts(store)
    lena = comment("--token", scene.tokens["lena"])

    assert unknown.returncode == 2 and "requires a token" in unknown.message, unknown
    assert untokened.returncode == 2 and "requires a token" in untokened.message
    assert outsider.returncode == 2 and "restricted to its approvers" in outsider.message
    assert lena.returncode == 0 and "as lena" in lena.stdout, lena
    assert counts(store)["audit_events"] == before["audit_events"] + 1  # the comment
    refused = [e for e in access_entries(store, gate) if e.outcome == "403"]
    assert [(e.name, e.action) for e in refused] == [("oscar", "comment")]
