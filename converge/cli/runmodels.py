"""``--model NAME`` and ``--allow-model-change``: a run that goes on (``approve``,
``reject``, ``resume``) with another model than the one it recorded when it
started (:mod:`converge.jobs.models`; refused otherwise, naming both)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:  # imported where a choice is made: converge.jobs is a run's
    from converge.jobs.models import ModelChoice

__all__ = ["AllowModelChangeOption", "ModelOption", "model_choice"]

ModelOption = Annotated[
    str | None,
    typer.Option(
        "--model",
        help="Go on with this model (e.g. test, openai:NAME) for the agents whose model "
        "comes from $CONVERGE_MODEL, instead of the one the run recorded when it started.",
    ),
]
AllowModelChangeOption = Annotated[
    bool,
    typer.Option(
        "--allow-model-change",
        help="Go on with $CONVERGE_MODEL even when it names another model than the run "
        "recorded (without it, or --model, that is refused).",
    ),
]


def model_choice(model: str | None, allow_change: bool) -> ModelChoice:
    """The :class:`ModelChoice` of the options (``--model ""`` counts as not given)."""
    from converge.jobs.models import ModelChoice

    return ModelChoice(model=(model or "").strip() or None, allow_change=allow_change)
