"""The CLI's commands are loaded on use (issue 58, C1): the table the help lists them
from is what the commands say now, and neither ``--version`` nor ``--help`` imports
a command's module (tests/test_cli_rough_edges.py checks the help's rows against the
built commands' summaries)."""

from __future__ import annotations

import os
from pathlib import Path

from converge.cli import catalog, cataloging
from tests.freshpython import Ran, converge_fresh

ROOT = Path(__file__).resolve().parent.parent


def test_the_catalog_is_what_the_commands_give_now() -> None:
    assert cataloging.from_commands() == catalog.COMMANDS, (
        "converge/cli/catalog.py is stale: run python -m converge.cli.cataloging"
    )


def _modules_after(args: list[str], cache: Path | None = None) -> Ran:
    """``converge ARGS`` in a fresh interpreter, its help cache in ``cache``."""
    return converge_fresh(args, {"XDG_CACHE_HOME": str(cache)} if cache else None)


def test_version_imports_neither_typer_nor_any_command() -> None:
    seen = _modules_after(["--version"])
    modules = seen.modules
    assert "converge" in seen.printed
    assert not [m for m in modules if m.startswith(("typer", "click", "rich", "converge.cli."))]


def test_help_lists_every_command_without_importing_one(tmp_path: Path) -> None:
    seen = _modules_after(["--help"], tmp_path)
    modules = seen.modules
    for entry in catalog.COMMANDS:
        assert entry.name in seen.printed
    command_modules = {f"converge.cli.{m}" for m in catalog.MODULES}
    assert command_modules & modules == set()
    assert not [m for m in modules if m.startswith(("audit", "sqlalchemy"))]


def test_a_command_imports_its_own_module_not_the_others() -> None:
    modules = _modules_after(["schema"]).modules
    assert "converge.cli.schema" in modules
    assert not {"converge.cli.serve", "converge.cli.timetravel", "converge.cli.worker"} & modules


def test_the_second_help_is_the_first_printed_again_without_typer(tmp_path: Path) -> None:
    first = _modules_after(["--help"], tmp_path)
    second = _modules_after(["--help"], tmp_path)
    assert second.printed == first.printed
    assert "typer" in first.modules
    modules = second.modules
    assert not [m for m in modules if m.startswith(("typer", "click", "rich"))]
    assert {p.name[:5] for p in (tmp_path / "converge").iterdir()} == {"help-"}


def _map_lines() -> dict[str, str]:
    """converge.cli's command map: each module's bullet, by module name."""
    import converge.cli

    doc = converge.cli.__doc__ or ""
    bullets = ("\n- " + doc.split("\n\n- ", 1)[1].split("\n\n")[0]).split("\n- ")
    lines = {}
    for bullet in bullets:
        if bullet.startswith(":mod:`converge.cli."):
            module = bullet.split("`")[1].removeprefix("converge.cli.")
            lines[module] = " ".join(bullet.split())
    return lines


def test_the_command_map_of_converge_cli_names_every_command_and_subcommand() -> None:
    """The map in converge.cli's docstring names each command under its module,
    a group's subcommands too (``token add``, ``config set``; issue 55)."""
    import importlib

    import typer

    from converge.cli.catalog import COMMANDS

    lines, missing = _map_lines(), []
    for entry in COMMANDS:
        command = typer.main.get_command(
            importlib.import_module(f"converge.cli.{entry.module}").app
        )
        group = getattr(command, "commands", None)  # typer's click is its own: no isinstance
        found = group[entry.name] if group is not None else command
        names = (
            [f"{entry.name} {sub}" for sub in found.commands]
            if getattr(found, "commands", None)
            else [entry.name]
        )
        missing += [
            f"{entry.module}: {n}" for n in names if f"``{n}``" not in lines.get(entry.module, "")
        ]
    assert missing == [], f"converge.cli's command map leaves out {missing}"


def test_the_help_cache_keeps_only_the_latest_renderings(tmp_path: Path) -> None:
    """Old renderings (other terminal sizes, older versions) and a killed process's
    partial write do not pile up in the user's cache."""
    from converge.cli import helpcache

    cache = tmp_path / "converge"
    cache.mkdir()
    old = [cache / f"help-old{i}.txt" for i in range(helpcache.KEPT + 3)]
    for age, path in enumerate(reversed(old)):
        path.write_text("stale")
        os.utime(path, (1_000_000 - age, 1_000_000 - age))
    partial = cache / "help-old0.123.tmp"
    partial.write_text("cut short")
    os.utime(partial, (1_000_000, 1_000_000))
    _modules_after(["--help"], tmp_path)
    left = sorted(p.name for p in cache.iterdir())
    assert len(left) == helpcache.KEPT
    assert [name for name in left if name.startswith("help-old")] == sorted(
        p.name for p in old[-(helpcache.KEPT - 1) :]
    )
