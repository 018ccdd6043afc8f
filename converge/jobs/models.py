"""Which model each agent of a job calls, recorded with the run that used it.

An agent's ``model`` defaults to ``$CONVERGE_MODEL`` and its ``base_url`` to
``$CONVERGE_MODEL_BASE_URL``. What a run's agents use is decided when the run
starts and recorded with it (``models`` in its job record, chained with its
header; the model string and the base URL, never an API key nor the URL's user
and password): ``{"license_reviewer": {"model": "openai:gemma3-270m", "base_url":
"http://127.0.0.1:8080/v1"}}``, ``{"model": null}`` for an agent left out for want
of a model (``if_no_model: skip``), left out in every leg of the run.

Every later leg of the run (``converge approve``, ``reject``, ``resume``, a
worker's resume or recovery, the inbox's) uses them where the environment does not
set them: the recorded base URL when ``$CONVERGE_MODEL_BASE_URL`` is unset, the
recorded model when ``$CONVERGE_MODEL`` is unset. A ``$CONVERGE_MODEL`` naming
another model than the recorded one is refused (:class:`ModelChanged`, naming
both) unless the command asks for it: ``--model NAME`` (:attr:`ModelChoice.model`)
or ``--allow-model-change`` (:attr:`ModelChoice.allow_change`). ``converge
replay`` and ``fork`` take ``$CONVERGE_MODEL`` when it is set (a replay under
other models says so) and the recorded models otherwise. A job file's own
``model:`` and ``base_url:`` are the job's: neither applies to them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from converge.errors import ModelChanged
from converge.jobs.spec import MODEL_ENV, AgentSpec, JobSpec

__all__ = [
    "BASE_URL_ENV",
    "AgentModel",
    "ModelChoice",
    "agent_models",
    "models_from_record",
    "models_record",
]

BASE_URL_ENV = "CONVERGE_MODEL_BASE_URL"
"""The environment variable an agent's ``base_url`` defaults to (as
:data:`converge.agents.endpoint.BASE_URL_ENV`)."""

OPENAI_PREFIXES = ("openai:", "openai-chat:")
"""The model strings a base URL applies to (as :mod:`converge.agents.endpoint`'s)."""


@dataclass(frozen=True, slots=True)
class AgentModel:
    """An agent's ``model`` (None: left out) and the ``base_url`` of the
    OpenAI-compatible server it calls (None: the model's provider's own)."""

    model: str | None
    base_url: str | None = None

    def label(self) -> str:
        """``openai:NAME at URL``, ``test``, or ``no model``."""
        if self.model is None:
            return "no model"
        return self.model if self.base_url is None else f"{self.model} at {self.base_url}"


@dataclass(frozen=True, slots=True)
class ModelChoice:
    """What a command asks for besides the recorded models: ``model`` (``--model
    NAME``) for the agents whose model comes from ``$CONVERGE_MODEL``, or
    ``allow_change`` (``--allow-model-change``): take ``$CONVERGE_MODEL`` even when
    it names another model than the run recorded."""

    model: str | None = None
    allow_change: bool = False


def agent_models(
    spec: JobSpec,
    recorded: Mapping[str, AgentModel] | None = None,
    choice: ModelChoice = ModelChoice(),
    environ: Mapping[str, str] | None = None,
) -> dict[str, AgentModel]:
    """The model and base URL of each agent of ``spec``, by name: the job file's,
    else ``choice``'s, the environment's or the ``recorded`` ones (see the module
    docstring). Raises :class:`ModelChanged` when ``$CONVERGE_MODEL`` names another
    model than one recorded and ``choice`` does not allow it."""
    env = os.environ if environ is None else environ
    env_model = env.get(MODEL_ENV, "").strip() or None
    env_base = env.get(BASE_URL_ENV, "").strip() or None
    out: dict[str, AgentModel] = {}
    for agent in spec.agents:
        was = None if recorded is None else recorded.get(agent.name)
        model = agent.model or _chosen(agent, was, choice, env_model)
        if agent.base_url:  # the job's own: resolve_model judges it
            out[agent.name] = AgentModel(model, agent.base_url)
            continue
        base = env_base or (was.base_url if was is not None else None)
        openai = model is not None and model.startswith(OPENAI_PREFIXES)
        out[agent.name] = AgentModel(model, base if openai else None)
    return out


def _chosen(
    agent: AgentSpec, was: AgentModel | None, choice: ModelChoice, env_model: str | None
) -> str | None:
    """The model of an agent whose job file names none (see :func:`agent_models`)."""
    asked = choice.model or env_model
    if was is None:  # a new run (or one recorded before its models were)
        return asked
    if was.model is None:  # left out when the run started: its suggestors stay
        return None
    if asked is None or asked == was.model:
        return was.model
    if choice.model is not None or choice.allow_change:
        return asked
    raise ModelChanged(
        f"agent {agent.name}: the run was recorded with model {was.label()}, and "
        f"${MODEL_ENV} asks for {asked}: a run goes on with the model it recorded unless "
        f"asked otherwise (--model {asked} or --allow-model-change to go on with {asked}; "
        f"unset ${MODEL_ENV} to go on with {was.model})",
        recorded=was.model,
        asked=asked,
    )


def models_record(models: Mapping[str, AgentModel]) -> dict[str, dict[str, str | None]]:
    """``models`` as a job record keeps them (a base URL without user and password)."""
    return {
        name: {"model": m.model, "base_url": _without_credentials(m.base_url)}
        for name, m in models.items()
    }


def models_from_record(data: Any) -> dict[str, AgentModel] | None:
    """The models a job record kept (None when it kept none: recorded before they
    were, or a job without agents)."""
    if not isinstance(data, dict):
        return None
    out: dict[str, AgentModel] = {}
    for name, entry in data.items():
        if not isinstance(entry, dict):
            continue
        model, base = entry.get("model"), entry.get("base_url")
        out[str(name)] = AgentModel(
            model if isinstance(model, str) else None, base if isinstance(base, str) else None
        )
    return out


def _without_credentials(url: str | None) -> str | None:
    """``url`` without a ``user:password@`` part (credentials are never recorded)."""
    if not url:
        return url
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = host + (f":{parts.port}" if parts.port is not None else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
