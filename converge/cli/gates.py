"""``converge gates | approve | reject | resume``: decide gates and continue runs.

Approving or rejecting goes through :func:`converge.decisions.decide`, the path
the approval inbox uses too: the decision is recorded exactly once (compare-and-set
in the store; a quorum gate counts one vote per person) and, when it decides the
gate, the run resumes from the job it recorded, in this process. Listing gates
first applies the deadlines that passed (``expired`` with its ``on_timeout``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import typer

from audit.queries import UnreadableGate, read_gates, resolve_gate_id
from audit.store import SqlRunStore
from converge.cli.actors import (
    ReaderTokenOption,
    actor,
    named,
    reader,
)
from converge.cli.commands import CommandGroup, option_groups
from converge.cli.deciding import (
    Proof,
    ServerOption,
    SignWithOption,
    TokenOption,
    decide_remotely,
)
from converge.cli.history import print_history
from converge.cli.markup import escape
from converge.cli.reading import read_store
from converge.cli.render import (
    DbOption,
    JsonOption,
    err,
    execute_with_progress,
    fail,
    failing_on,
    local_time,
    open_sql_store,
    print_fitted,
    say_error,
)
from converge.cli.results import render_result
from converge.cli.runmodels import AllowModelChangeOption, ModelOption, model_choice
from converge.cli.service import BrokerOption, QueueOption
from converge.cli.tables import Column
from engine import ConvergeError, GateRecord

if TYPE_CHECKING:  # imported where used: listing gates decides nothing and runs no job
    from converge.decisions import DecisionReport, Execute
    from converge.jobs import Job
    from converge.jobs.models import ModelChoice
    from engine import Engine, GateDecision, RunResult

app = CommandGroup()


def _gate_dict(g: GateRecord) -> dict[str, Any]:
    return {
        "gate_id": g.gate_id,
        "run_id": g.run_id,
        "status": g.status,
        "summary": g.summary,
        "suggestor": g.suggestor,
        "cycle": g.cycle,
        "proposal_id": g.proposal_id,
        "proposal": g.proposal,
        "opened_at": g.opened_at,
        "expires_at": g.expires_at,
        "decided_by": g.decided_by,
        "decided_at": g.decided_at,
        "reason": g.reason,
    }


def _store(db: str | None) -> SqlRunStore:
    # every command here reads a store the runs were recorded in: never create one
    store = open_sql_store(db)
    return store


def resolve_gate(store: SqlRunStore, text: str) -> str:
    """The full id of the gate ``text`` names (a unique prefix, ``RUNPREFIX-gN``, or a
    run with one pending gate: :func:`audit.queries.resolve_gate_id`); exits 2
    naming the candidates, or the gates there are."""
    with failing_on(ConvergeError):
        return resolve_gate_id(store, text)


def _cli_execute(store: SqlRunStore, as_json: bool) -> Execute:
    """Run the job under the CLI's progress bar (errors exit 2 with one line)."""

    def execute(job: Job, step: Callable[[Engine], RunResult]) -> RunResult:
        return execute_with_progress(job, store, as_json=as_json, resume=step)

    return execute


def _content(g: GateRecord) -> str:
    """The proposal's key and content, as the reviewer needs them to decide."""
    from converge.values import readable

    return f"{g.proposal.get('key', '?')}: {readable(g.proposal.get('content'))}"


@app.command("gates")
def gates_cmd(
    gate: Annotated[
        str | None, typer.Argument(help="With --history: the gate whose history to show.")
    ] = None,
    history: Annotated[
        bool,
        typer.Option(
            "--history",
            help="Everything that happened to GATE: opened, votes, comments, escalation, "
            "decision, refused decisions, notifications.",
        ),
    ] = False,
    pending: Annotated[bool, typer.Option("--pending", help="Only pending gates.")] = False,
    expire: Annotated[
        bool,
        typer.Option(
            "--expire",
            help="First decide the gates past their deadline by their on_timeout and "
            "resume their runs (for cron, when no converge serve or worker keeps them).",
        ),
    ] = False,
    db: DbOption = None,
    as_json: JsonOption = False,
    token: ReaderTokenOption = None,
) -> None:
    """List HITL gates (newest first); only lists, unless --expire. A gate that
    cannot be read is one error line naming its cell (exit 1), the others listed.
    With --token: the gates its person may read (docs/access.md)."""
    # the policy, the decisions and the notifications are imported when asked for
    # (--token, --expire): a listing needs none of them
    # only --expire writes: a listing reads an archived or older store as it is
    store = _store(db) if expire else read_store(db, token)
    person = reader(store, token)
    if history or gate is not None:
        if gate is None or not history:
            fail("give a gate and --history: converge gates GATE --history")
        gate_id = resolve_gate(store, gate)
        if person is not None:
            from converge.access import Action, ask, gate_view, run_view

            with failing_on(ConvergeError):
                record = store.get_gate(gate_id)
                view = gate_view(record, run_view(store, record.run_id))
                ask(store, person, Action.READ_GATE, view, client="cli")
        print_history(store, gate_id, as_json)
        return
    with failing_on(ConvergeError):
        if expire:
            from converge.decisions import expire_due
            from converge.notifications import notify_after_command

            for gate_id in expire_due(store, _quiet_execute(store)):
                err.print(escape(f"gate {gate_id} expired: decided by its on_timeout"))
            notify_after_command(store)
        found = read_gates(store, pending=pending)
        if person is not None:
            from converge.access import Action, check, gate_view, run_views

            views = run_views(store, {g.run_id for g in found if g.run_id})
            found = [
                g
                for g in found
                if (
                    check(person, Action.READ_GATE, gate_view(g, views[g.run_id]))
                    if isinstance(g, GateRecord)
                    else g.run_id is None or check(person, Action.SEE_RUN, views[g.run_id])
                )
            ]
    # a row that cannot be read: one error line each, the others listed, exit 1
    records = [g for g in found if isinstance(g, GateRecord)]
    unreadable = [g for g in found if isinstance(g, UnreadableGate)]
    if as_json:
        listed = [_gate_dict(g) if isinstance(g, GateRecord) else g.to_dict() for g in found]
        sys.stdout.write(json.dumps(listed, indent=2) + "\n")
    else:
        _print_gates(records)
    for bad in unreadable:
        say_error(str(bad.error))
    if unreadable:
        raise typer.Exit(1)


def _print_gates(records: list[GateRecord]) -> None:
    """``converge gates``' table."""
    rows = [
        (
            g.gate_id,
            g.status,
            str(g.cycle),
            _content(g),
            g.summary,
            f"{g.decided_by} {local_time(g.decided_at)}" if g.decided_by else "",
            g.reason or "",
        )
        for g in records
    ]
    print_fitted("gates", GATE_COLUMNS, rows)


GATE_COLUMNS = (
    # ids are what a user copies into `approve`: never wrapped or cut; a gate id
    # starts with its run id, so the run has no column of its own
    Column("gate", whole=True),
    Column("status", whole=True, priority=1),
    Column("cycle", whole=True, justify="right", priority=4),
    Column("proposal", floor=24),
    Column("summary", floor=16, priority=2),
    Column("decided", floor=16, priority=3, optional=True),
    Column("reason", floor=16, priority=3, optional=True),
)
"""The columns of ``converge gates``: at 80 columns the gate and its proposal
stay, the others are dropped from the lowest priority up; a column no gate has
a value in (``decided``, ``reason`` of pending gates) is left out."""


def _quiet_execute(store: SqlRunStore) -> Execute:
    def execute(job: Job, step: Callable[[Engine], RunResult]) -> RunResult:
        return step(job.build_engine(store))

    return execute


DetachOption = Annotated[
    bool,
    typer.Option(
        "--detach",
        help="Record the decision and send the run's resume to a worker (--broker, "
        "$CONVERGE_BROKER; none: a background process); exit 0 at once.",
    ),
]


DeciderOption = Annotated[
    str | None,
    typer.Option(
        "--by",
        help="Who decides (recorded; default $CONVERGE_USER, else your token's person, "
        "else your login, as for run and resume).",
    ),
]


def _decide(
    gate_id: str,
    by: str | None,
    make: Callable[[str], GateDecision],
    db: str | None,
    as_json: bool,
    detach: tuple[str | None, str] | None = None,
    proof: Proof = Proof(),  # noqa: B008 (frozen, never mutated)
    models: ModelChoice | None = None,
) -> None:
    """Decide as ``by`` (None: :func:`cli_decider`'s default) the decision ``make``
    makes for that name; ``detach`` = (broker, queue) sends the resume there
    instead of running it; ``proof``: the decider's token and signing key, or the
    server to decide through (:mod:`converge.cli.deciding`); ``models``: another
    model than the run recorded, asked for (:mod:`converge.jobs.models`; None: the
    recorded ones)."""
    from audit.ledger import require_key
    from converge.cli.service import DetachedProcess, run_queue_for
    from converge.decisions import decide, job_of_run
    from converge.governance import cli_decider
    from converge.jobs.models import ModelChoice
    from engine.errors import DuplicateVote

    models = ModelChoice() if models is None else models
    if by is not None and not by.strip():
        fail("--by must name who decides (it is recorded in the audit trail)")
    if models != ModelChoice() and (detach is not None or proof.server is not None):
        fail(
            "--model and --allow-model-change apply to a resume in this process: not with "
            "--detach or --server (a worker goes on with the models the run recorded)"
        )
    if proof.server is not None:
        decide_remotely(gate_id, make(actor(by)), proof, as_json)
    signer = proof.signer()
    store = _store(db)
    gate_id = resolve_gate(store, gate_id)  # a prefix, or a run's one pending gate
    with failing_on(ConvergeError):
        # the key and the decider first: a refusal leaves nothing behind
        require_key(store, f"deciding gate {gate_id}")
        who = cli_decider(
            store, named(by), proof.token, signed=signer is not None, login=actor(None)
        )
        decision = make(who.name)
    queue = None if detach is None else run_queue_for(detach[0], detach[1], db)
    try:
        report = decide(
            store,
            gate_id,
            decision,
            execute=_cli_execute(store, as_json),
            queue=queue,
            signer=signer,
            role=who.role,
            models=models,
        )
    except (DuplicateVote, ConvergeError) as exc:
        fail(str(exc))
    if queue is not None and not report.still_needed:
        run_id = report.gate.run_id
        if as_json:
            sys.stdout.write(json.dumps(_report_dict(report), indent=2) + "\n")
        else:
            verb = "approved" if decision.approved else "rejected"
            where = (
                "in a background `converge worker --run` process of this machine (no broker)"
                if isinstance(queue, DetachedProcess)
                else f"on a worker of queue {detach[1] if detach else ''}"
            )
            err.print(
                escape(
                    f"{verb} gate {report.gate.gate_id} as {decision.by}; run {run_id} "
                    f"resumes {where} (follow it: converge watch {run_id})"
                )
            )
        raise typer.Exit(0)
    # only now is the decision recorded: say so, then show where the run went
    verb = "approved" if decision.approved else "rejected"
    if report.result is None:
        message = (
            f"{verb} gate {gate_id} as {decision.by}: {report.required - report.still_needed} "
            f"of {report.required} approvals; {report.still_needed} more needed"
        )
        if as_json:
            sys.stdout.write(json.dumps(_report_dict(report), indent=2) + "\n")
        else:
            err.print(escape(message))
        raise typer.Exit(_PENDING_EXIT)
    if not as_json:
        err.print(
            escape(f"{verb} gate {gate_id} as {decision.by}; resumed run {report.gate.run_id}")
        )
    job = job_of_run(store, report.gate.run_id)
    _finish(report.result, as_json, job, store, db)


_PENDING_EXIT = 10
"""Exit code while the gate still waits for approvals (as a run paused at a gate)."""


def _report_dict(report: DecisionReport) -> dict[str, Any]:
    return {
        "gate": _gate_dict(report.gate),
        "approvals": [
            {"by": v.voter, "approved": v.approved, "reason": v.reason} for v in report.votes
        ],
        "approvals_required": report.required,
        "still_needed": report.still_needed,
    }


def _finish(result: RunResult, as_json: bool, job: Job, store: SqlRunStore, db: str | None) -> None:
    render_result(result, as_json=as_json, job=job, store=store, db=db)
    raise typer.Exit(result.stop_reason.exit_code)


@dataclass(frozen=True, slots=True)
class Deciding:
    """The options ``approve`` and ``reject`` share, in the order of their help (an
    option group: :func:`converge.cli.commands.option_groups`)."""

    db: DbOption = None
    as_json: JsonOption = False
    detach: DetachOption = False
    broker: BrokerOption = None
    queue: QueueOption = "converge"
    token: TokenOption = None
    sign_with: SignWithOption = None
    server: ServerOption = None
    model: ModelOption = None
    allow_model_change: AllowModelChangeOption = False

    def decide(self, gate_id: str, by: str | None, make: Callable[[str], GateDecision]) -> None:
        """:func:`_decide` with these options: the decision ``make`` makes for ``by``."""
        detached = (self.broker, self.queue) if self.detach else None
        proof = Proof(self.token, self.sign_with, self.server)
        choice = model_choice(self.model, self.allow_model_change)
        _decide(gate_id, by, make, self.db, self.as_json, detached, proof, choice)


DECIDING = Deciding()
"""No option given: the default of ``approve``'s and ``reject``'s ``options``."""


@app.command("approve")
@option_groups()
def approve_cmd(
    gate_id: Annotated[
        str, typer.Argument(help="The gate to approve (a prefix, or its run's id).")
    ],
    by: DeciderOption = None,
    reason: Annotated[
        str | None, typer.Option("--reason", help="Why (recorded in the run's chain).")
    ] = None,
    value: Annotated[
        str | None,
        typer.Option(
            "--value",
            help="A human answer the proposal's content takes (e.g. a license: MIT), "
            "checked by the gate policy's validate_value hook.",
        ),
    ] = None,
    options: Deciding = DECIDING,
) -> None:
    """Approve a gate (with one approval of its quorum) and resume its run to the next
    stop, with the models the run recorded (--model, --allow-model-change: another)."""
    from engine import GateDecision

    def make(who: str) -> GateDecision:
        return GateDecision.approve(by=who, reason=reason, value=value)

    options.decide(gate_id, by, make)


@app.command("reject")
@option_groups()
def reject_cmd(
    gate_id: Annotated[str, typer.Argument(help="The gate to reject (a prefix, or its run's id).")],
    by: DeciderOption = None,
    reason: Annotated[
        str | None,
        typer.Option("--reason", help="Why (recorded; required unless the gate says otherwise)."),
    ] = None,
    options: Deciding = DECIDING,
) -> None:
    """Reject a gate (its proposal is dropped and recorded) and resume the run, with the
    models it recorded (--model, --allow-model-change: another)."""
    from engine import GateDecision

    def make(who: str) -> GateDecision:
        return GateDecision.reject(by=who, reason=reason)

    options.decide(gate_id, by, make)
