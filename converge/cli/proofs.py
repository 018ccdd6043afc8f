"""``converge keys generate | export | verify-bundle``, and the signed side of
``anchor`` and ``verify --from/--to`` (docs/audit-format.md).

Thin: the keys and signatures live in :mod:`audit.signing._statements`, the ledger's tree and
heads in :mod:`audit.ledger._tree`, bundles in :mod:`audit.proofs._bundles` and
:mod:`audit.proofs._bundle_check`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from audit import SCHEMA_VERSION, SqlRunStore
from audit.core import SIGNING_KEY_ENV  # naming it imports no signing room
from converge.cli.actors import ReaderTokenOption, ask_read, reader
from converge.cli.commands import CommandGroup
from converge.cli.markup import escape
from converge.cli.reading import RunArgument
from converge.cli.render import (
    DbOption,
    fail,
    failing_on,
    open_run_store,
    open_sql_store,
    out,
    resolve_run,
)
from engine import ConvergeError
from engine.errors import BundleError

if TYPE_CHECKING:  # the rest is imported by the commands that use it: `anchor` pays for none
    from audit.signing import Signer

app = CommandGroup()
keys_app = CommandGroup(help="Ed25519 signing keys.", no_args_is_help=True)
app.add_typer(keys_app, name="keys")

SigningKeyOption = Annotated[
    str | None,
    typer.Option(
        "--signing-key",
        help=f"The Ed25519 private key (PEM) that signs (default: ${SIGNING_KEY_ENV}).",
    ),
]
PublicKeyOption = Annotated[
    Path,
    typer.Option("--public-key", help="The Ed25519 public key (PEM) to check signatures with."),
]


def _signer(path: str | None) -> Signer:
    """The signer of ``--signing-key`` or ``$CONVERGE_SIGNING_KEY``; exits 2 without one."""
    from audit.signing import signer_from_env

    with failing_on(ConvergeError):
        signer = signer_from_env(path)
    if signer is None:
        fail(f"no signing key: give --signing-key PATH or set ${SIGNING_KEY_ENV}")
    return signer


def _write_store(db: str | None) -> SqlRunStore:
    """The existing store of ``--db``, opened to write (signatures are kept in it)."""
    store = open_sql_store(db)
    return store


def _export_store(db: str | None) -> SqlRunStore:
    """The existing store of ``--db`` for an export: opened to write (the signed
    heads and checkpoints are kept in it) when it has the current schema and may be
    written; else opened to read, nothing written or upgraded (an archived copy, a
    role that may only SELECT, a store of an earlier version)."""
    store = open_run_store(db, read_only=True, must_exist=True)
    assert isinstance(store, SqlRunStore)
    if store.read_version < SCHEMA_VERSION or not store.writable:
        return store
    store.close()
    return _write_store(db)


@keys_app.command("generate")
def keys_generate_cmd(
    directory: Annotated[
        Path, typer.Option("--dir", help="Where to write converge.key, .pub and .vkey.")
    ] = Path("."),
    witness: Annotated[
        bool,
        typer.Option(
            "--witness", help="A witness's key: converge.vkey verifies its cosignatures (0x04)."
        ),
    ] = False,
) -> None:
    """Write a new Ed25519 key pair: DIR/converge.key (private, mode 0600),
    DIR/converge.pub (PEM) and DIR/converge.vkey (the C2SP verifier key that checks
    its checkpoints, or with --witness its cosignatures); an existing key is never
    overwritten (exit 2)."""
    from audit.signing import COSIGNATURE, ED25519, generate_keys, load_public_key, write_vkey

    try:
        key, pub = generate_keys(directory)
        vkey = write_vkey(directory, load_public_key(pub), COSIGNATURE if witness else ED25519)
    except (ConvergeError, OSError) as exc:
        fail(str(exc))
    out.print(
        f"private key: {key} (keep it secret; set ${SIGNING_KEY_ENV} to sign)", highlight=False
    )
    out.print(f"public key:  {pub} (give it to whoever verifies)", highlight=False)
    what = "cosignatures" if witness else "checkpoints"
    out.print(f"verifier key: {vkey} (checks its {what}, C2SP signed-note)", highlight=False)


@app.command("export")
def export_cmd(
    run_id: RunArgument,
    proof: Annotated[Path, typer.Option("--proof", help="The bundle file to write (JSON).")],
    fact: Annotated[
        str | None,
        typer.Option("--fact", help="Prove this one fact only; the others stay hidden."),
    ] = None,
    checkpoint: Annotated[
        Path | None,
        typer.Option(
            "--checkpoint",
            help="Prove against this checkpoint of the store (e.g. one a witness cosigned).",
        ),
    ] = None,
    signing_key: SigningKeyOption = None,
    db: DbOption = None,
    token: ReaderTokenOption = None,
) -> None:
    """Write a run's proof bundle (events, facts, checkpoint, the run statement and the
    ledger's head, signed, with the inclusion proof and the ledger's checkpoint note),
    or with --fact a one-fact bundle; `converge verify-bundle FILE --public-key KEY`
    checks it with no database."""
    from audit.ledger import integrate_pending
    from audit.proofs import export_fact, export_run, write_bundle
    from converge.access import Action
    from converge.cli.checkpoints import read_text

    signer = _signer(signing_key)
    note = None if checkpoint is None else read_text(checkpoint, "--checkpoint")
    store = _export_store(db)
    run_id = resolve_run(store, run_id)
    ask_read(store, reader(store, token), Action.EXPORT_RUN, run_id)
    try:
        if not store.read_only:  # the run's last commit in the ledger the bundle proves
            integrate_pending(store)
        if fact is None:
            bundle = export_run(store, signer, run_id, note)
        else:
            bundle = export_fact(store, signer, run_id, fact, note)
    except ConvergeError as exc:
        fail(str(exc))
    finally:
        store.close()
    try:
        write_bundle(bundle, proof)
    except OSError as exc:
        fail(f"cannot write {proof}: {exc.strerror or exc}")
    what = f"fact {fact} of run {run_id}" if fact else f"run {run_id}"
    out.print(f"wrote the proof bundle of {escape(what)} to {escape(str(proof))}", highlight=False)


def _public(path: Path) -> Any:
    from audit.signing import load_public_key

    with failing_on(ConvergeError):
        return load_public_key(path)


@app.command("verify-bundle")
def verify_bundle_cmd(
    file: Annotated[Path, typer.Argument(help="A bundle written by `converge export --proof`.")],
    public_key: PublicKeyOption,
    witness: Annotated[
        str | None,
        typer.Option(
            "--witness",
            help="Require this witness's cosignature on the checkpoint (its verifier key, "
            "or a file holding it).",
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help='Print {"ok", "checks": [{"name", "ok", "detail"}]}.')
    ] = False,
) -> None:
    """Check a proof bundle offline with the public key alone; one line per check,
    exit 0 when every check passes, 1 when any fails (2: not a bundle)."""
    from audit.proofs import read_bundle, verify_bundle
    from converge.cli.checkpoints import read_vkey

    public = _public(public_key)
    cosigner = None if witness is None else read_vkey(witness, "--witness")
    try:
        bundle = read_bundle(file)
    except BundleError as exc:
        fail(str(exc))
    checks = verify_bundle(bundle, public, cosigner)
    ok = all(c.ok for c in checks)
    if as_json:
        typer.echo(json.dumps({"ok": ok, "checks": [c.to_dict() for c in checks]}, indent=2))
    else:
        for c in checks:
            mark = "[green]ok[/]    " if c.ok else "[bold red]FAILED[/]"
            out.print(
                f"{mark} {escape(c.name)}: {escape(c.detail)}", highlight=False, soft_wrap=True
            )
        passed = sum(c.ok for c in checks)
        out.print(f"{passed}/{len(checks)} checks pass", highlight=False)
    raise typer.Exit(0 if ok else 1)


def signed_anchor(db: str | None, signing_key: str | None, as_json: bool) -> None:
    """``converge anchor`` with a signing key: sign the ledger's RFC 6962 head, keep
    it in the store and print it as one line without spaces."""
    from audit.ledger import head_line, integrate_pending, signed_head

    signer = _signer(signing_key)
    store = _write_store(db)
    try:
        integrate_pending(store)  # the head covers every run head committed before
        head = signed_head(store, signer)
    except ConvergeError as exc:
        fail(str(exc))
    finally:
        store.close()
    if as_json:
        typer.echo(json.dumps({"anchor": head_line(head), "head": head}, indent=2))
    else:
        typer.echo(head_line(head))


def signing_configured(signing_key: str | None) -> bool:
    """Whether ``--signing-key`` or ``$CONVERGE_SIGNING_KEY`` is given."""
    return signing_key is not None or bool(os.environ.get(SIGNING_KEY_ENV))


def _head_arg(text: str, option: str) -> dict[str, Any]:
    """A signed head given on the command line, or the file that holds it."""
    from audit.ledger import parse_head

    path = Path(text)
    if not text.lstrip().startswith("{") and path.is_file():
        text = path.read_text(encoding="utf-8")
    try:
        return parse_head(text)
    except ValueError as exc:
        fail(f"{option}: {exc}")


def verify_consistency_cmd(
    db: str | None, head1: str, head2: str, public_key: Path | None, as_json: bool
) -> None:
    """``converge verify --from HEAD1 --to HEAD2 --public-key KEY``: the ledger only
    grew between two signed heads (exit 0), or where it forked (exit 1)."""
    from audit.ledger import check_consistency

    if public_key is None:
        fail("--from/--to need --public-key KEY (the key that signed the heads)")
    public = _public(public_key)
    first, second = _head_arg(head1, "--from"), _head_arg(head2, "--to")
    store = open_run_store(db, read_only=True)
    assert isinstance(store, SqlRunStore)
    try:
        report = check_consistency(store, first, second, public)
    except ConvergeError as exc:
        fail(str(exc))
    finally:
        store.close()
    if as_json:
        typer.echo(json.dumps(report.to_dict(), indent=2))
    else:
        mark = "[green]ok[/]" if report.ok else "[bold red]FAILED[/]"
        out.print(
            f"{mark} consistency {report.size1} → {report.size2}: {escape(report.detail)}",
            highlight=False,
            soft_wrap=True,
        )
    raise typer.Exit(0 if report.ok else 1)
