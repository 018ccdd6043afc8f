"""``converge token add``: API tokens for the approval inbox (``converge serve``).

The token is printed once, as the last word of the output; the store keeps only
its sha256 (``audit.tokens``).
"""

from __future__ import annotations

from typing import Annotated

import typer

from audit.store import SqlRunStore
from audit.tokens import ROLES, add_token
from converge.cli.commands import CommandGroup
from converge.cli.render import DbOption, fail, open_run_store, out
from engine import ConvergeError

app = CommandGroup()
token_app = CommandGroup(help="API tokens of the people who decide gates in the inbox.")
app.add_typer(token_app, name="token")


@token_app.command("add")
def add_cmd(
    name: Annotated[str, typer.Argument(help="Who the token authenticates (recorded as decider).")],
    role: Annotated[
        str, typer.Option("--role", help="approver (may decide gates) or viewer (read only).")
    ] = "approver",
    db: DbOption = None,
) -> None:
    """Create an API token for NAME and print it (only its hash is stored)."""
    if role not in ROLES:
        fail(f"--role must be one of {', '.join(ROLES)}, got {role!r}")
    store = open_run_store(db)
    assert isinstance(store, SqlRunStore)
    try:
        token = add_token(store, name, role)
    except ConvergeError as exc:
        fail(str(exc))
    # the token is the last word: scripts take it with `| awk '{print $NF}'`
    out.print(
        f"{role} token for {name} (shown once, only its hash is stored): {token}",
        highlight=False,
        soft_wrap=True,
    )
