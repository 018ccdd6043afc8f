"""Tampering with a run of chain format 2, redacted or not (issue 56): a stored fact
chunk row, a checkpoint part, a redaction marker or its commitment, a
``fact_redacted`` event, or content erased by hand, and ``verify`` (the store's
and ``converge verify``) says which; a run redacted by :func:`audit.redact_fact`
still verifies. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import Connection, select, update

from audit import SqlRunStore, redact_fact
from audit.core import json_compact
from audit.tables import audit_events, checkpoint_parts, fact_chunks
from engine.facts import canonical_json
from tests import redactionfixtures
from tests.faultfixtures import run_cli
from tests.redactionfixtures import REASON, opened
from tests.test_redaction import INITIAL, _engine, _fact_id

# the shared fixtures, by name
url = redactionfixtures.url


@pytest.fixture
def store(url: str) -> Iterator[SqlRunStore]:
    with opened(url, part_chars=200) as s:  # a paused run's checkpoint spans parts
        yield s


def _paused(store: SqlRunStore, *, redact: bool) -> str:
    """A paused run of format 2 (its checkpoint and fact chunks kept); its e-mail
    and contact facts redacted when ``redact``."""
    run_id = _engine(store, gated=True).run(INITIAL).run_id
    if redact:
        for key in ("email", "contact"):
            redact_fact(store, run_id, _fact_id(store, run_id, key), by="alice", reason=REASON)
    report = store.verify(run_id)
    assert report.ok, report
    return run_id


def _event(conn: Connection, run_id: str, kind: str, fact_id: str | None = None) -> Any:
    ev = audit_events.c
    query = select(ev.seq, ev.payload).where(ev.run_id == run_id, ev.kind == kind)
    if fact_id is not None:
        query = query.where(ev.fact_id == json.dumps(fact_id))
    return conn.execute(query).one()


def _set_payload(conn: Connection, run_id: str, seq: int, data: dict[str, Any]) -> None:
    conn.execute(
        update(audit_events)
        .where(audit_events.c.run_id == run_id, audit_events.c.seq == seq)
        .values(payload=canonical_json(data))
    )


def _edit_promoted(
    store: SqlRunStore, run_id: str, key: str, edit: Callable[[dict[str, Any]], None]
) -> None:
    fact_id = _fact_id(store, run_id, key)
    with store.transaction() as conn:
        seq, payload = _event(conn, run_id, "fact_promoted", fact_id)
        data = json.loads(payload)
        edit(data)
        _set_payload(conn, run_id, seq, data)


def _fails(store: SqlRunStore, url: str, run_id: str, reason: str) -> None:
    """Verify (the store's, ``verify --all`` and the CLI's) fails with ``reason`` in it."""
    report = store.verify(run_id)
    assert not report.ok and reason in str(report.reason), report
    assert not all(r.ok for r in store.verify_all())
    cli = run_cli(["verify", run_id, "--db", url])
    assert cli.returncode != 0 and reason in cli.stdout + cli.stderr, cli


def _chunk_rows(store: SqlRunStore, run_id: str) -> list[tuple[int, list[Any]]]:
    with store.transaction(write=False) as conn:
        found = conn.execute(
            select(fact_chunks.c.first, fact_chunks.c.data).where(fact_chunks.c.run_id == run_id)
        ).all()
    return [(int(first), json.loads(data)) for first, data in found]


def _edit_chunk_row(
    store: SqlRunStore, run_id: str, fact_id: str, edit: Callable[[list[Any]], None]
) -> None:
    for first, rows in _chunk_rows(store, run_id):
        for row in rows:
            if row[0] == fact_id:
                edit(row)
                with store.transaction() as conn:
                    conn.execute(
                        update(fact_chunks)
                        .where(fact_chunks.c.run_id == run_id, fact_chunks.c.first == first)
                        .values(data=json_compact(rows))
                    )
                return
    raise AssertionError(f"no chunk row of {fact_id}")


def test_a_redacted_run_verifies_with_the_store_and_the_cli(store: SqlRunStore, url: str) -> None:
    run_id = _paused(store, redact=True)
    assert run_cli(["verify", run_id, "--db", url]).returncode == 0
    assert run_cli(["verify", "--all", "--db", url]).returncode == 0
    with store.transaction(write=False) as conn:
        parts = conn.execute(
            select(checkpoint_parts.c.part).where(checkpoint_parts.c.run_id == run_id)
        ).all()
    assert parts, "the checkpoint was meant to span parts"
    assert _chunk_rows(store, run_id), "the paused run was meant to keep fact chunks"


def _answer_flipped(row: list[Any]) -> None:
    row[2] = "no"


def _commitment_zeroed(row: list[Any]) -> None:
    assert set(row[8]) == {"commitment"}  # a redacted fact's row keeps its commitment only
    row[8] = {"commitment": "0" * 64}


@pytest.mark.parametrize(
    ("redact", "key", "edit"),
    [
        pytest.param(False, "answer", _answer_flipped, id="answer"),
        pytest.param(True, "answer", _answer_flipped, id="answer-of-a-redacted-run"),
        pytest.param(True, "email", _commitment_zeroed, id="commitment-of-a-redacted-fact"),
    ],
)
def test_a_changed_fact_chunk_row_fails_verify(
    store: SqlRunStore, url: str, redact: bool, key: str, edit: Callable[[list[Any]], None]
) -> None:
    run_id = _paused(store, redact=redact)
    _edit_chunk_row(store, run_id, _fact_id(store, run_id, key), edit)
    _fails(store, url, run_id, "fact chunks differ from the checkpoint")


@pytest.mark.parametrize("redact", [False, True])
def test_a_changed_checkpoint_part_fails_verify(store: SqlRunStore, url: str, redact: bool) -> None:
    run_id = _paused(store, redact=redact)
    with store.transaction() as conn:
        part, data = conn.execute(
            select(checkpoint_parts.c.part, checkpoint_parts.c.data)
            .where(checkpoint_parts.c.run_id == run_id)
            .order_by(checkpoint_parts.c.part)
        ).first() or (None, None)
        assert part is not None and data
        forged = data.replace('"', "'", 1) if '"' in data else data[:-1] + "x"
        conn.execute(
            update(checkpoint_parts)
            .where(checkpoint_parts.c.run_id == run_id, checkpoint_parts.c.part == part)
            .values(data=forged)
        )
    _fails(store, url, run_id, "checkpoint differs from the chain")


def _commitment_forged(data: dict[str, Any]) -> None:
    data["commitment"] = "0" * 64


def _marker_forged(data: dict[str, Any]) -> None:
    data["content"]["redacted"]["by"] = "mallory"


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        pytest.param(_commitment_forged, "payload changed", id="commitment"),
        pytest.param(
            _marker_forged, "redaction marker differs from its fact_redacted", id="marker"
        ),
    ],
)
def test_a_changed_fact_promoted_of_a_redacted_fact_fails_verify(
    store: SqlRunStore, url: str, edit: Callable[[dict[str, Any]], None], reason: str
) -> None:
    run_id = _paused(store, redact=True)
    _edit_promoted(store, run_id, "email", edit)
    _fails(store, url, run_id, reason)


@pytest.mark.parametrize("field", ["reason", "by", "commitment", "fact_id"])
def test_a_changed_fact_redacted_event_fails_verify(
    store: SqlRunStore, url: str, field: str
) -> None:
    run_id = _paused(store, redact=True)
    with store.transaction() as conn:
        seq, payload = conn.execute(
            select(audit_events.c.seq, audit_events.c.payload)
            .where(audit_events.c.run_id == run_id, audit_events.c.kind == "fact_redacted")
            .order_by(audit_events.c.seq)
        ).first()
        data = json.loads(payload)
        data[field] = "0" * 64 if field == "commitment" else "forged"
        _set_payload(conn, run_id, seq, data)
    _fails(store, url, run_id, "payload changed")


def test_content_erased_by_hand_without_a_fact_redacted_event_fails_verify(
    store: SqlRunStore, url: str
) -> None:
    run_id = _paused(store, redact=False)
    mark = {"at": 1.0, "by": "mallory", "reason": "hidden"}

    def edit(data: dict[str, Any]) -> None:
        from engine.hashing.commitment import fact_commitment

        data["commitment"] = fact_commitment(data)
        del data["salt"]
        data["content"] = {"redacted": mark}

    _edit_promoted(store, run_id, "email", edit)
    (email,) = [f for f in store.facts(run_id) if f.key == "email"]
    assert email.content == {"redacted": mark}  # every hash still holds: the chain alone passes
    _fails(store, url, run_id, "is redacted without a fact_redacted event")


def test_content_put_back_after_its_redaction_fails_verify(store: SqlRunStore, url: str) -> None:
    run_id = _engine(store, gated=True).run(INITIAL).run_id
    fact_id = _fact_id(store, run_id, "email")
    with store.transaction(write=False) as conn:
        seq, kept = _event(conn, run_id, "fact_promoted", fact_id)  # a backup's copy
    redact_fact(store, run_id, fact_id, by="alice", reason=REASON)
    assert store.verify(run_id).ok
    with store.transaction() as conn:
        conn.execute(
            update(audit_events)
            .where(audit_events.c.run_id == run_id, audit_events.c.seq == seq)
            .values(payload=kept)
        )
    _fails(store, url, run_id, f"fact_redacted names fact {fact_id}, which the run does not")
