"""``converge checkpoint`` and ``converge witness cosign``: the ledger's checkpoints in
the C2SP formats, and a witness that cosigns them (docs/audit-format.md).

Thin: the notes and keys live in :mod:`audit.signing._notes`, checkpoints in
:mod:`audit.ledger._checkpoint`, the witness in :mod:`audit.ledger._witness`.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Annotated

import typer

from audit.ledger import (
    Checkpoint,
    checkpoint_note,
    consistency_proof,
    cosign_checkpoint,
    cosigned_by,
    format_proof,
    integrate_pending,
    kept_checkpoint,
    parse_checkpoint,
    parse_proof,
)
from audit.signing import (
    SIGNING_KEY_ENV,
    Signer,
    VerifierKey,
    load_signer,
    parse_vkey,
    signer_from_env,
)
from converge.cli.commands import CommandGroup
from converge.cli.markup import escape
from converge.cli.render import DbOption, err, fail, failing_on, open_sql_store
from engine import ConvergeError
from engine.errors import CheckpointError, WitnessRefused

app = CommandGroup()
witness_app = CommandGroup(
    help="A witness: cosign checkpoints consistent with the last one cosigned.",
    no_args_is_help=True,
)
app.add_typer(witness_app, name="witness")


def read_text(path: Path, option: str) -> str:
    """The UTF-8 text of the file ``option`` names; exits 2 when it cannot be read."""
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"{option}: cannot read {path}: {getattr(exc, 'strerror', None) or exc}")


def read_vkey(text: str, option: str) -> VerifierKey:
    """A verifier key given on the command line, or the file holding it; exits 2
    when it is neither."""
    path = Path(text)
    try:
        is_file = path.is_file()
    except OSError:  # a key's text too long for a file name
        is_file = False
    if is_file:
        text = read_text(path, option)
    try:
        return parse_vkey(text)
    except CheckpointError as exc:
        fail(f"{option}: {exc}")


@app.command("checkpoint")
def checkpoint_cmd(
    origin: Annotated[
        str | None,
        typer.Option("--origin", help="The log's name (default: the store's own, kept)."),
    ] = None,
    since: Annotated[
        Path | None,
        typer.Option("--from", help="A checkpoint taken before: write the proof from it."),
    ] = None,
    proof: Annotated[
        Path | None,
        typer.Option("--proof", help="Where --from's consistency proof goes (base64 lines)."),
    ] = None,
    signing_key: Annotated[
        str | None,
        typer.Option(
            "--signing-key",
            help=f"The key that signs a new checkpoint (default: ${SIGNING_KEY_ENV}); "
            "without one, the last checkpoint kept in the store is printed.",
        ),
    ] = None,
    db: DbOption = None,
) -> None:
    """Print the ledger's checkpoint: a new one signed with the key, or without one
    the last checkpoint kept in the store.

    A C2SP tlog-checkpoint signed note (origin, size, base64 RFC 6962 root; Go's
    golang.org/x/mod/sumdb/note opens it), kept in the store when signed. With --from
    OLD --proof FILE also write the consistency proof from OLD."""
    if (since is None) != (proof is None):
        fail("--from and --proof go together")
    with failing_on(ConvergeError):
        signer = signer_from_env(signing_key)
    old = None if since is None else _checkpoint(read_text(since, "--from"), "--from")
    store = open_sql_store(db)
    try:
        if signer is None:
            text = kept_checkpoint(store, origin)
            if text is None:
                fail(
                    "no checkpoint kept in this store yet: sign one with --signing-key PATH "
                    f"or ${SIGNING_KEY_ENV} (converge keys generate makes a key)"
                )
        else:
            integrate_pending(store)  # the checkpoint covers every run head committed before
            text = checkpoint_note(store, signer, origin).render()
        size = _checkpoint(text, "checkpoint").size
        if old is not None and old.size > size:
            fail(f"--from: its size {old.size} is past the checkpoint's {size}")
        steps = [] if old is None else consistency_proof(store, old.size, size)
    except ConvergeError as exc:
        fail(str(exc))
    finally:
        store.close()
    if proof is not None:
        try:
            proof.write_text(format_proof(steps), encoding="utf-8")
        except OSError as exc:
            fail(f"cannot write {proof}: {exc.strerror or exc}")
    typer.echo(text, nl=False)


MAX_STATE_BYTES = 64 * 1024
"""A file larger than this is no checkpoint: not read when looking for a witness's state."""


def _warn_other_states(previous: Path, checkpoint: Path, witness: Signer) -> None:
    """Warn (stderr) when ``previous`` does not exist but its folder holds other
    checkpoints ``witness`` cosigned: this cosignature would start over, trusting the
    new checkpoint on first use, where the witness meant to go on from one of them."""
    try:
        candidates = sorted(
            p
            for p in previous.resolve().parent.iterdir()
            if p.is_file()
            and p.resolve() != checkpoint.resolve()
            and p.stat().st_size <= MAX_STATE_BYTES
        )
    except OSError:
        return
    found = []
    for p in candidates:
        try:
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if cosigned_by(text, witness):
            found.append(p.name)
    if found:
        err.print(
            f"[bold yellow]warning:[/] --previous {escape(str(previous))} does not exist: "
            "this cosigns the checkpoint as a first one, trusting it as it is (TOFU); "
            f"its folder holds {escape(', '.join(found))}, cosigned by this witness before: "
            "give that as --previous to go on from it",
            highlight=False,
            soft_wrap=True,
        )


def _checkpoint(text: str, option: str) -> Checkpoint:
    try:
        return parse_checkpoint(text)[0]
    except CheckpointError as exc:
        fail(f"{option}: {exc}")


@witness_app.command("cosign")
def witness_cosign_cmd(
    checkpoint: Annotated[Path, typer.Option("--checkpoint", help="The log's new checkpoint.")],
    previous: Annotated[
        Path,
        typer.Option(
            "--previous",
            help="The last checkpoint this witness cosigned, its state; replaced by the "
            "one cosigned now. Missing: this is the first, trusted as it is (trust on "
            "first use, TOFU), with a warning when its folder holds another checkpoint "
            "this witness cosigned.",
        ),
    ],
    key: Annotated[Path, typer.Option("--key", help="The witness's Ed25519 private key (PEM).")],
    log_key: Annotated[
        str,
        typer.Option("--log-key", help="The log's verifier key (converge.vkey), or its file."),
    ],
    proof: Annotated[
        Path | None,
        typer.Option("--proof", help="The consistency proof from --previous (base64 lines)."),
    ] = None,
) -> None:
    """Cosign a checkpoint (C2SP tlog-cosignature/v1) once it is signed by the log
    and extends the last checkpoint cosigned: print it with the cosignature line
    added and keep it in --previous; exit 1 when refused, nothing written.

    The first checkpoint (no --previous file yet) is cosigned as it is: trust on
    first use (TOFU). A --previous that names no file while its folder holds another
    checkpoint this witness cosigned is warned of (a mistyped path would start over)."""
    log = read_vkey(log_key, "--log-key")
    with failing_on(ConvergeError):
        witness = load_signer(key)
    new = read_text(checkpoint, "--checkpoint")
    old = read_text(previous, "--previous") if previous.exists() else None
    if old is None:
        _warn_other_states(previous, checkpoint, witness)
    try:
        steps = [] if proof is None else parse_proof(read_text(proof, "--proof"))
        cosigned = cosign_checkpoint(new, old or None, steps, witness, log, int(time.time()))
    except WitnessRefused as exc:
        fail(f"refused: {exc}", 1)
    except CheckpointError as exc:
        fail(str(exc))
    text = cosigned.render()
    staged = previous.with_name(previous.name + ".new")
    try:  # the witness's state replaced whole or not at all
        staged.write_text(text, encoding="utf-8")
        os.replace(staged, previous)
    except OSError as exc:
        fail(f"cannot write {previous}: {exc.strerror or exc}")
    typer.echo(text, nl=False)
