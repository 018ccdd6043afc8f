"""People and their groups, who acted on a run, and the access log of refusals.

Tokens belong to people (``audit.people._tokens``, by name); people belong to groups
(``converge user add NAME --group legal``). A gate's approvers name people or
groups (``gates.hitl.require_approval(approvers=...)``). ``run_actors`` records
who submitted, ran or resumed a run: a four-eyes gate refuses them as deciders.
The access log keeps every refused request (403, 429) and failed sign-in.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Connection, Table, delete, insert, select
from sqlalchemy.exc import IntegrityError

from audit.cells import bad_cell
from audit.people._schema import ensure_inbox_tables, inbox_readable
from audit.signing import person
from audit.store import SqlRunStore
from audit.tables import access_log, api_tokens, group_members, run_actors
from engine.errors import CorruptRow, StoreError

MAX_DETAIL_CHARS = 1_000
"""The longest detail an access-log row keeps (characters)."""


def _read_set(
    store: SqlRunStore, read: Callable[[Connection, str], set[str]], key: str
) -> set[str]:
    """``read(conn, key)`` in a read transaction; empty before the inbox tables exist."""
    if not inbox_readable(store):
        return set()
    with store.transaction(write=False) as conn:
        return read(conn, key)


def _insert_once(store: SqlRunStore, table: Table, **values: object) -> None:
    """Insert one row into ``table``; a row already there (its key taken) is kept."""
    try:
        with store.transaction() as conn:
            conn.execute(insert(table).values(**values))
    except StoreError as exc:
        if not isinstance(exc.__cause__, IntegrityError):
            raise


def add_to_groups(store: SqlRunStore, name: str, groups: list[str]) -> None:
    """Make ``name`` a member of each of ``groups`` (already a member: unchanged)."""
    ensure_inbox_tables(store)
    for group in groups:
        _insert_once(store, group_members, group_name=group, name=name, added_at=time.time())


def remove_from_group(store: SqlRunStore, name: str, group: str) -> None:
    """End ``name``'s membership of ``group``."""
    ensure_inbox_tables(store)
    with store.transaction() as conn:
        conn.execute(
            delete(group_members).where(
                group_members.c.group_name == group, group_members.c.name == name
            )
        )


def groups_of(store: SqlRunStore, name: str) -> set[str]:
    """The groups ``name`` belongs to."""
    return _read_set(store, groups_in, name)


def groups_in(conn: Connection, name: str) -> set[str]:
    """:func:`groups_of` read on ``conn`` (a transaction the caller holds)."""
    rows = conn.execute(
        select(group_members.c.group_name).where(group_members.c.name == name)
    ).all()
    return {r[0] for r in rows}


def members(store: SqlRunStore) -> dict[str, set[str]]:
    """Every group and its members."""
    if not inbox_readable(store):
        return {}
    with store.transaction(write=False) as conn:
        rows = conn.execute(select(group_members.c.group_name, group_members.c.name)).all()
    out: dict[str, set[str]] = {}
    for group, name in rows:
        out.setdefault(group, set()).add(name)
    return out


def knows(store: SqlRunStore, name: str) -> bool:
    """Whether the store knows person ``name``: registered (``converge user add``,
    :mod:`audit.signing._known_people`), holding a token that is not revoked, or in a group."""
    if person(store, name) is not None:
        return True
    if not inbox_readable(store):
        return False
    with store.transaction(write=False) as conn:
        return holds_token_or_group(conn, name)


def holds_token_or_group(conn: Connection, name: str) -> bool:
    """Whether ``name`` holds a token that is not revoked or is in a group (read on
    ``conn``, a transaction the caller holds)."""
    token = conn.execute(
        select(api_tokens.c.name)
        .where(api_tokens.c.name == name, api_tokens.c.revoked_at.is_(None))
        .limit(1)
    ).first()
    member = conn.execute(
        select(group_members.c.name).where(group_members.c.name == name).limit(1)
    ).first()
    return token is not None or member is not None


def record_actor(store: SqlRunStore, run_id: str, name: str, action: str) -> None:
    """Record that ``name`` ``action``-ed the run (``submitted``, ``ran``, ``resumed``)."""
    ensure_inbox_tables(store)
    _insert_once(store, run_actors, run_id=run_id, name=name, action=action, ts=time.time())


def actors_of(store: SqlRunStore, run_id: str) -> set[str]:
    """Everyone who submitted, ran or resumed ``run_id``."""
    return _read_set(store, actors_in, run_id)


def actors_in(conn: Connection, run_id: str) -> set[str]:
    """:func:`actors_of` read on ``conn`` (a transaction the caller holds)."""
    rows = conn.execute(select(run_actors.c.name).where(run_actors.c.run_id == run_id)).all()
    return {r[0] for r in rows}


@dataclass(frozen=True, slots=True)
class AccessEntry:
    """One refused request or failed sign-in: when (unix seconds), from which
    ``client``, as whom (``name``, None when unknown), the ``action`` tried, its
    ``target`` (a gate or run id), the ``outcome`` (``403``, ``429``, ``401``) and why."""

    ts: float
    client: str | None
    name: str | None
    action: str
    target: str | None
    outcome: str
    detail: str | None


def log_access(
    store: SqlRunStore,
    action: str,
    outcome: str,
    *,
    client: str | None = None,
    name: str | None = None,
    target: str | None = None,
    detail: str | None = None,
    ts: float | None = None,
) -> None:
    """Add a row to the access log (never a token or secret in ``detail``); ``ts``:
    unix seconds, default now."""
    ensure_inbox_tables(store)
    with store.transaction() as conn:
        conn.execute(
            insert(access_log).values(
                ts=time.time() if ts is None else ts,
                client=client,
                name=name,
                action=action,
                target=target,
                outcome=outcome,
                detail=None if detail is None else detail[:MAX_DETAIL_CHARS],
            )
        )


FAILED_SIGN_IN = "401"
"""The access log's outcome of a failed sign-in or unknown token."""


def failures_since(store: SqlRunStore, client: str, since: float, limit: int) -> list[float]:
    """The times (unix seconds, oldest first) of the last ``limit`` failed sign-ins
    from ``client`` after ``since``, whichever server logged them."""
    if not inbox_readable(store):
        return []
    q = (
        select(access_log.c.ts)
        .where(
            access_log.c.client == client,
            access_log.c.outcome == FAILED_SIGN_IN,
            access_log.c.ts > since,
        )
        .order_by(access_log.c.ts.desc())
        .limit(limit)
    )
    with store.transaction(write=False, single=True) as conn:
        return sorted(float(r[0]) for r in conn.execute(q))


def access_entries(
    store: SqlRunStore, target: str | None = None, corrupt: list[CorruptRow] | None = None
) -> list[AccessEntry]:
    """The access log, oldest first (of one gate or run when ``target`` is given).
    A row that cannot be read raises ``CorruptRow``, or, given ``corrupt``, is left
    out and its error added there."""
    if not inbox_readable(store):
        return []
    q = select(access_log).order_by(access_log.c.ts, access_log.c.id)
    if target is not None:
        q = q.where(access_log.c.target == target)
    with store.transaction(write=False) as conn:
        rows = conn.execute(q).all()
    out: list[AccessEntry] = []
    for r in rows:
        bad = bad_cell(access_log, r._mapping)
        if bad is None:
            out.append(AccessEntry(r.ts, r.client, r.name, r.action, r.target, r.outcome, r.detail))
            continue
        error = CorruptRow(access_log.name, f"access log entry {r.id}", *bad)
        if corrupt is None:
            raise error
        corrupt.append(error)
    return out
