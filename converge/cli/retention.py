"""``converge prune``: remove stopped runs older than a date, their tombstones kept
in the ledger (:func:`audit.retention.prune`; docs/audit.md, "Retention"); and
``converge redact``: erase a fact's content, its commitment kept
(:func:`audit.redaction.redact_fact`; docs/audit.md, "Redaction")."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from audit import SqlRunStore, redact_fact
from audit.retention import PruneReport, prune
from audit.settings import RETENTION_DAYS, get_setting
from audit.signing import signer_from_env
from converge.access import STORE, Action, ask
from converge.cli.actors import ManagerTokenOption, actor, reader
from converge.cli.commands import CommandGroup
from converge.cli.markup import escape
from converge.cli.proofs import SigningKeyOption
from converge.cli.reading import print_json
from converge.cli.render import (
    DbOption,
    JsonOption,
    fail,
    failing_on,
    local_time,
    open_sql_store,
    out,
)
from engine import ConvergeError

app = CommandGroup()

DAY_S = 86400.0


def parse_before(text: str) -> float:
    """``--before``'s date (``YYYY-MM-DD``, or an ISO date and time; UTC unless it
    names its offset) as unix seconds; ``ValueError`` naming the option."""
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"--before {text!r}: not a date (YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS)"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def _cutoff(store: SqlRunStore, before: str | None, keep_days: int | None) -> tuple[float, str]:
    """(unix seconds, how it was chosen) of the runs to prune: ``--before``,
    ``--keep-days`` or the store's ``retention-days``; exits 2 without any."""
    if before is not None and keep_days is not None:
        fail("give --before DATE or --keep-days N, not both")
    if before is not None:
        try:
            return parse_before(before), f"stopped before {before}"
        except ValueError as exc:
            fail(str(exc))
    if keep_days is None:
        with failing_on(ConvergeError):
            setting = get_setting(store, RETENTION_DAYS)
        if setting == "off":
            fail(
                "give --before DATE or --keep-days N, or set the store's retention: "
                "converge config set retention-days N"
            )
        keep_days = int(setting)
    if keep_days < 0:
        fail(f"--keep-days {keep_days}: a number of days, 0 or more")
    return time.time() - keep_days * DAY_S, f"older than {keep_days} day(s)"


@app.command("prune")
def prune_cmd(
    before: Annotated[
        str | None,
        typer.Option("--before", help="Prune the runs that stopped before this date (UTC)."),
    ] = None,
    keep_days: Annotated[
        int | None,
        typer.Option(
            "--keep-days",
            help="Prune the runs that stopped more than N days ago (default: the store's "
            "retention-days).",
        ),
    ] = None,
    job: Annotated[str | None, typer.Option("--job", help="Only the runs of this job.")] = None,
    archive: Annotated[
        Path | None,
        typer.Option(
            "--archive",
            help="Write each run's proof bundle (RUN.json) into this folder first; needs "
            "--signing-key.",
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only list what would be pruned.")
    ] = False,
    reason: Annotated[
        str | None,
        typer.Option("--reason", help="Why, kept in each tombstone (default: the retention)."),
    ] = None,
    by: Annotated[
        str | None,
        typer.Option(
            "--by",
            help="Who prunes, kept in each tombstone (default $CONVERGE_USER, else your "
            "login; with --token, its person).",
        ),
    ] = None,
    signing_key: SigningKeyOption = None,
    db: DbOption = None,
    token: ManagerTokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Remove the stopped runs older than a date, a tombstone of each kept in the ledger.

    Their events, facts, checkpoints and model recordings are removed; each leaves a
    tombstone in the ledger (its chain head, last seq, facts root, who pruned it,
    when, why), so that the ledger and every other run still verify and `converge
    verify --all` reports it as pruned. Paused, queued and running runs are never
    pruned, nor a run with a fork still paused.
    Admins only (with --token); without a token, whoever holds the database.

    Example: converge prune --keep-days 90 --archive /srv/archive --signing-key k.key
    """
    store = open_sql_store(db)
    try:
        person = reader(store, token)
        if person is not None:
            with failing_on(ConvergeError):
                ask(store, person, Action.PRUNE, STORE, client="cli")
        cutoff, chosen = _cutoff(store, before, keep_days)
        signer = None
        if archive is not None:
            with failing_on(ConvergeError):
                signer = signer_from_env(signing_key)
        who = person.name if person is not None else actor(by)
        with failing_on(ConvergeError):
            report = prune(
                store,
                before=cutoff,
                by=who,
                reason=reason or f"retention: {chosen}",
                job=job,
                archive=archive,
                signer=signer,
                dry_run=dry_run,
            )
    finally:
        store.close()
    if as_json:
        print_json(report.to_dict())
        return
    _print(report)


def _print(report: PruneReport) -> None:
    verb = "would prune" if report.dry_run else "pruned"
    for run in report.pruned:
        archived = f", archived as {run.archived}" if run.archived else ""
        out.print(
            escape(
                f"{verb} {run.run_id} ({run.job}, stopped {local_time(run.ended_at)}){archived}"
            ),
            highlight=False,
            soft_wrap=True,
        )
    for run_id, why in report.kept.items():
        out.print(escape(f"kept {run_id}: {why}"), highlight=False, soft_wrap=True)
    n = len(report.pruned)
    out.print(f"{verb} {n} run{'' if n == 1 else 's'}", highlight=False)


@app.command("redact")
def redact_cmd(
    run_id: Annotated[str, typer.Argument(help="The run (its id or a unique prefix).")],
    fact_id: Annotated[str, typer.Argument(help="The fact to redact, e.g. email#0.")],
    reason: Annotated[
        str, typer.Option("--reason", help="Why (required), kept in the fact_redacted event.")
    ],
    db: DbOption = None,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar="CONVERGE_TOKEN",
            help="The API token of who redacts, an admin (required; docs/access.md).",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Erase a fact's content from a stopped or paused run, its commitment kept.

    The content goes from the run's events, fact chunks and checkpoint; the facts
    tree, the chain and proof bundles still verify (they commit to the fact through
    a salted hash), and a fact_redacted event chains who, when and why. Only runs of
    chain format 2 (converge config set chain-format 2) can be redacted.
    Admins only: needs --token (or $CONVERGE_TOKEN).

    Example: converge redact 3f2a email#0 --reason "GDPR art. 17 request #12"
    """
    store = open_sql_store(db)
    try:
        person = reader(store, token)
        if person is None:
            fail("converge redact needs the token of an admin: --token or $CONVERGE_TOKEN")
        with failing_on(ConvergeError):
            ask(store, person, Action.REDACT, STORE, client="cli")
            run = store.resolve_run_id(run_id)
            done = redact_fact(store, run, fact_id, by=person.name, reason=reason)
    finally:
        store.close()
    if as_json:
        print_json(done.to_dict())
        return
    out.print(
        escape(
            f"redacted {done.fact_id} of run {done.run_id} (commitment {done.commitment}); "
            f"fact_redacted is event {done.seq}"
        ),
        highlight=False,
        soft_wrap=True,
    )
