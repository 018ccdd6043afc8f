"""The read commands import only what they run (issue 58, C1): no command builds
typer's pydantic ``TypeAdapter`` for a parameter left unset or given text
(:func:`converge.cli.commands.defer_coercion`), ``converge runs`` imports no stop
model, ledger or signing room, ``converge gates`` no report model; the values still
arrive coerced (an ``int`` option given ``1`` is the integer 1, a bad one exits 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import cli_bench
from tests.freshpython import converge_fresh

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """The C1 benchmark's store (benchmarks/cli_bench.py), of 3 runs: the first paused
    at a gate; its path and the last run's id."""
    workdir = tmp_path_factory.mktemp("c1")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cli_bench, "STORE_RUNS", 3)
        return cli_bench._store(str(workdir))


def _run(args: list[str]) -> tuple[str, int, set[str]]:
    """``converge ARGS`` in a fresh interpreter: its stdout, exit code and the modules
    it imported."""
    ran = converge_fresh(args)
    return ran.printed, ran.code, ran.modules


ADAPTERS = "typer._adapters"  # typer's pydantic coercion, built per parameter


def test_runs_imports_no_adapter_stop_model_ledger_or_signing(store: tuple[str, str]) -> None:
    db, _ = store
    printed, code, modules = _run(["runs", "--db", db])
    assert code == 0 and "runs (3)" in printed
    assert ADAPTERS not in modules
    assert not {"engine.stop", "audit.ledger", "audit.signing", "cryptography"} & modules
    assert not {"rich.console", "rich.markup"} & modules  # printed to a pipe without rich
    assert not [m for m in modules if m.startswith("converge.cli.") and "gates" in m]


def test_gates_imports_no_adapter_nor_report_models(store: tuple[str, str]) -> None:
    db, _ = store
    printed, code, modules = _run(["gates", "--db", db])
    assert code == 0 and "license.unknown: name=pkg-0" in printed
    assert ADAPTERS not in modules
    assert not {"converge.reports", "rich.console"} & modules


@pytest.mark.parametrize("command", ["show", "verify"])
def test_a_run_read_by_its_id_builds_no_adapter(store: tuple[str, str], command: str) -> None:
    db, run_id = store
    printed, code, modules = _run([command, run_id[:8], "--db", db])
    assert code == 0 and run_id in printed
    assert ADAPTERS not in modules
    if command == "verify":  # its lines written as rich would print them to a pipe
        assert printed.splitlines()[-1] == "1/1 runs verify"
        assert not {"rich.console", "rich.markup"} & modules


def test_a_value_that_needs_coercion_is_still_coerced(store: tuple[str, str]) -> None:
    db, _ = store
    printed, code, modules = _run(["runs", "--db", db, "--limit", "1", "--json"])
    assert code == 0 and len(json.loads(printed)) == 1
    assert ADAPTERS in modules  # built for --limit's value alone
    printed, code, _ = _run(["runs", "--db", db, "--limit", "one"])
    assert code == 2


@pytest.mark.parametrize(
    "text",
    [
        "",
        "plain",
        "[bold]x[/]",
        "\\[red]",
        "a\\",
        "a\\\\",
        "[1, 2]",
        "[#fff]",
        "[@click]",
        "x[/y]z\\",
    ],
)
def test_escape_is_richs(text: str) -> None:
    from rich.markup import escape as rich_escape

    from converge.cli.markup import escape

    assert escape(text) == rich_escape(text)
