"""``converge config set | show``: the store's settings (:mod:`audit.settings`)."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from audit.settings import SETTINGS, set_setting, settings
from audit.store import SqlRunStore
from converge.cli.actors import ManagerTokenOption, managed_store
from converge.cli.commands import CommandGroup
from converge.cli.render import DbOption, JsonOption, fail, open_run_store, out
from engine import ConvergeError

app = CommandGroup()
config_app = CommandGroup(help="Settings of the audit store.", no_args_is_help=True)
app.add_typer(config_app, name="config")


@config_app.command("set")
def set_cmd(
    name: Annotated[str, typer.Argument(help=f"The setting: {', '.join(sorted(SETTINGS))}.")],
    value: Annotated[
        str,
        typer.Argument(
            help="Its value (require-token: true, false or auto; retention-days: N or off)."
        ),
    ],
    db: DbOption = None,
    token: ManagerTokenOption = None,
) -> None:
    """Set a store setting. require-token true: approve / reject / run / submit /
    resume / fork need the API token of who acts (--token or $CONVERGE_TOKEN);
    auto (the default): true once anyone is registered (converge user add).

    Example: converge config set require-token true
    """
    store = managed_store(db, token)
    try:
        stored = set_setting(store, name, value)
    except ConvergeError as exc:
        fail(str(exc))
    finally:
        store.close()
    out.print(f"{name} = {stored}", highlight=False)


@config_app.command("show")
def show_cmd(db: DbOption = None, as_json: JsonOption = False) -> None:
    """Every store setting and its value (defaults included)."""
    store = open_run_store(db, read_only=True)
    assert isinstance(store, SqlRunStore)
    try:
        values = settings(store)
    except ConvergeError as exc:
        fail(str(exc))
    finally:
        store.close()
    if as_json:
        sys.stdout.write(json.dumps(values, indent=2) + "\n")
        return
    for name, value in values.items():
        out.print(f"{name} = {value}  ({SETTINGS[name].help})", highlight=False)
