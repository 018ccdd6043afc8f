"""``converge token add | list | revoke`` and ``converge user add``: the people of the
approval inbox (``converge serve``), their tokens and groups.

A token is printed once, as the last word of the output; the store keeps only
its sha256 (``audit.people._tokens``). A person may hold several tokens (one person to a
quorum); groups are what a gate's ``approvers`` name.
"""

from __future__ import annotations

import re
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer

from audit.people import (
    ROLES,
    access_entries,
    add_to_groups,
    add_token,
    groups_of,
    list_tokens,
    revoke_tokens,
)
from audit.signing import SigningKeyError, add_person
from converge.cli.actors import ManagerTokenOption, managed_store
from converge.cli.commands import CommandGroup
from converge.cli.render import (
    DbOption,
    JsonOption,
    fail,
    failing_on,
    local_time,
    out,
    print_fitted,
)
from converge.cli.tables import Column
from engine import ConvergeError
from engine.result import counted

app = CommandGroup()
token_app = CommandGroup(help="API tokens of the people who decide gates in the inbox.")
app.add_typer(token_app, name="token")
user_app = CommandGroup(help="People of the inbox and the groups a gate's approvers name.")
app.add_typer(user_app, name="user")

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> float:
    """``30d``, ``12h``, ``15m``, ``90s`` → seconds. Raises ``ValueError``."""
    m = _DURATION.match(text.strip())
    if m is None:
        raise ValueError(f"{text!r} is not a duration like 30d, 12h, 15m or 90s")
    return float(m.group(1)) * _SECONDS[m.group(2)]


@token_app.command("add")
def add_cmd(
    name: Annotated[str, typer.Argument(help="Who the token authenticates (recorded as decider).")],
    role: Annotated[
        str,
        typer.Option(
            "--role",
            help="admin (all, and people and tokens), runner (runs, forks, cancels), "
            "approver (and decides gates) or viewer (reads and comments): docs/access.md.",
        ),
    ] = "approver",
    expires: Annotated[
        str | None,
        typer.Option("--expires", help="Refused after this long: 30d, 12h, 15m, 90s."),
    ] = None,
    db: DbOption = None,
    token: ManagerTokenOption = None,
) -> None:
    """Create an API token for NAME and print it (only its hash is stored)."""
    if role not in ROLES:
        fail(f"--role must be one of {', '.join(ROLES)}, got {role!r}")
    try:
        lifetime = None if expires is None else parse_duration(expires)
    except ValueError as exc:
        fail(f"--expires: {exc}")
    store = managed_store(db, token, must_exist=False)
    with failing_on(ConvergeError):
        made = add_token(store, name, role, lifetime)
    # the token is the last word: scripts take it with `| awk '{print $NF}'`
    out.print(
        f"{role} token for {name} (shown once, only its hash is stored): {made}",
        highlight=False,
        soft_wrap=True,
    )


@token_app.command("list")
def list_cmd(
    db: DbOption = None, as_json: JsonOption = False, token: ManagerTokenOption = None
) -> None:
    """List the tokens: person, role, created, expires, revoked (never the token)."""
    store = managed_store(db, token)  # the inbox tables may be created
    with failing_on(ConvergeError):
        tokens = list_tokens(store)
    if as_json:
        rows = [
            {
                "name": t.name,
                "role": t.role,
                "created_at": t.created_at,
                "expires_at": t.expires_at,
                "revoked_at": t.revoked_at,
            }
            for t in tokens
        ]
        out.print_json(data=rows)
        return
    print_fitted(
        "tokens",
        TOKEN_COLUMNS,
        [
            (
                t.name,
                t.role,
                local_time(t.created_at),
                local_time(t.expires_at) or "never",
                local_time(t.revoked_at),
            )
            for t in tokens
        ],
    )


TOKEN_COLUMNS = (
    Column("name", whole=True),
    Column("role", whole=True),
    Column("created", whole=True, priority=2),
    Column("expires", whole=True, priority=1),
    Column("revoked", whole=True, priority=1, optional=True),
)
"""The columns of ``converge token list``."""


@token_app.command("revoke")
def revoke_cmd(
    name: Annotated[str, typer.Argument(help="Whose tokens to revoke.")],
    db: DbOption = None,
    token: ManagerTokenOption = None,
) -> None:
    """Revoke every token of NAME at once: the API refuses them, and their open
    streams and sessions end within a second or two."""
    store = managed_store(db, token)
    with failing_on(ConvergeError):
        count = revoke_tokens(store, name)
    out.print(f"revoked {counted(count, 'token')} of {name}", highlight=False)


@user_app.command("add")
def user_add_cmd(
    name: Annotated[str, typer.Argument(help="The person (the name their tokens carry).")],
    group: Annotated[
        list[str] | None, typer.Option("--group", help="A group to join (repeat for more).")
    ] = None,
    public_key: Annotated[
        Path | None,
        typer.Option(
            "--public-key",
            help="Their Ed25519 public key (PEM, converge keys generate): the decisions "
            "they sign (--sign-with) are checked against it by converge verify.",
        ),
    ] = None,
    db: DbOption = None,
    token: ManagerTokenOption = None,
) -> None:
    """Register NAME as a person of the store, in groups (a gate's approvers name people
    or groups), with the public key their signed decisions are checked against.
    Once anyone is registered, decisions must name a registered person (--by)."""
    pem = None
    if public_key is not None:
        try:
            pem = public_key.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            fail(f"--public-key: cannot read {public_key}: {exc}")
    store = managed_store(db, token, must_exist=False)
    try:
        who = add_person(store, name, pem)
        add_to_groups(store, name, list(group or []))
        now = sorted(groups_of(store, name))
    except SigningKeyError as exc:
        fail(f"--public-key {public_key}: {exc}")
    except ConvergeError as exc:
        fail(str(exc))
    key = f"; public key {who.key_id}" if who.key_id else ""
    out.print(f"{name}: groups {', '.join(now) or '(none)'}{key}", highlight=False)


@app.command("access-log")
def access_log_cmd(
    target: Annotated[
        str | None, typer.Option("--target", help="Only the entries of this run or gate.")
    ] = None,
    db: DbOption = None,
    as_json: JsonOption = False,
    token: ManagerTokenOption = None,
) -> None:
    """The access log, oldest first: every refused request or command (403, exit 2),
    failed sign-in (401) and client over the sign-in limit (429): when, from where, as
    whom, the action, its run or gate, and why (docs/access.md)."""
    store = managed_store(db, token)
    with failing_on(ConvergeError):
        entries = access_entries(store, target)
    if as_json:
        out.print_json(data=[asdict(e) for e in entries])
        return
    rows = [
        (
            local_time(e.ts),
            e.outcome,
            e.name or "?",
            e.client or "?",
            e.action,
            e.target or "",
            e.detail or "",
        )
        for e in entries
    ]
    print_fitted("access log", ACCESS_COLUMNS, rows)


ACCESS_COLUMNS = (
    Column("time", whole=True),
    Column("outcome", whole=True),
    Column("who", whole=True, priority=1),
    Column("client", whole=True, priority=3),
    Column("action", whole=True, priority=2),
    Column("target", whole=True, priority=4, optional=True),
    Column("why", floor=24),
)
"""The columns of ``converge access-log``."""
