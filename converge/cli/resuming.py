"""``converge resume``: continue a run stopped by a budget, a policy or a cancel, an
expired gate's run, or a crashed one, with more budget if given."""

from __future__ import annotations

from typing import Annotated

import typer

from audit.ledger import require_key
from audit.queries import read_gates
from converge.access import Action, run_view
from converge.cli.actors import NO_RUNNER_OPTIONS, RunnerFlags, asked
from converge.cli.budgets import NO_BUDGET_OPTIONS, BudgetFlags, resumed_budget
from converge.cli.commands import CommandGroup, option_groups
from converge.cli.legs import finish_leg
from converge.cli.render import (
    DbOption,
    JsonOption,
    execute_with_progress,
    fail,
    failing_on,
    open_sql_store,
    resolve_run,
)
from converge.cli.runmodels import AllowModelChangeOption, ModelOption, model_choice
from converge.decisions import apply_expiry, is_expired, job_of_run
from engine import Budget, ConvergeError, GateRecord

app = CommandGroup()


@app.command("resume")
@option_groups()
def resume_cmd(
    run_id: Annotated[str, typer.Argument(help="A run stopped by a budget, policy or cancel.")],
    budget: BudgetFlags = NO_BUDGET_OPTIONS,
    db: DbOption = None,
    as_json: JsonOption = False,
    acting: RunnerFlags = NO_RUNNER_OPTIONS,
    model: ModelOption = None,
    allow_model_change: AllowModelChangeOption = False,
) -> None:
    """Continue a stopped, expired-gate or crashed run (more budget optional), with the
    models it recorded (--model, --allow-model-change: another)."""
    store = open_sql_store(db)
    run_id = resolve_run(store, run_id)  # a unique prefix of the id will do
    with failing_on(ConvergeError):
        require_key(store, f"resuming run {run_id}")  # before anything is written
    who = acting.principal(store)  # four eyes relies on it: checked before any write
    asked(store, who, Action.START_RUN, lambda: run_view(store, run_id))
    try:
        # a pending gate of this run past its deadline: decided by on_timeout first,
        # then this command resumes the run (with its budget); others' runs go on
        for gate in read_gates(store, pending=True):  # another run's corrupt gate: not ours
            if isinstance(gate, GateRecord) and gate.run_id == run_id and is_expired(gate):
                apply_expiry(store, gate, resume=False)
        job = job_of_run(store, run_id)
        job.model_choice = model_choice(model, allow_model_change)
        job.agent_models()  # another model than recorded, not asked for: refused here
        checkpoint = store.load_checkpoint(run_id)
        current = Budget.model_validate(checkpoint["budget"])
    except (ConvergeError, KeyError, ValueError) as exc:
        fail(str(exc))
    # no budget given: the run's own (a crashed leg's: the budget it was resumed with)
    given = resumed_budget(
        current, checkpoint, budget.changes(), budget.add_cycles, cost_flag=budget.cost_flag
    )
    result = execute_with_progress(
        job, store, as_json=as_json, resume=lambda engine: engine.resume_run(run_id, given)
    )
    # after the leg: a kill before its claim leaves nothing of this command behind
    finish_leg(store, job, result, by=who.name, action="resumed", as_json=as_json, db=db)
