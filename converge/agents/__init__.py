"""LLM agents as suggestors (docs/agents.md), built on pydantic-ai (extra ``agents``).

An agent is a suggestor like any other, so budgets, gates, stop policies and the
audit see it the same way:

- :func:`agent_suggestor` wraps a ``pydantic_ai.Agent``: its prompt is built from
  the facts of the keys it ``reads``; its output (a pydantic model, a list of them,
  or ``str``) becomes proposals on ``writes`` whose parents are those facts.
- Usage: the agent's ``RunUsage`` becomes the execution's :class:`engine.Usage`
  (tokens, and USD from pydantic-ai's priced usage, i.e. genai-prices, or from
  ``price=``). A cost that cannot be known, in a run with a cost budget, is a
  configuration error (``Error(error_category="configuration")``), never a zero.
- Budgets reach inside the call: each agent run gets ``UsageLimits`` from
  ``ctx.remaining_budget()``; ``UsageLimitExceeded`` becomes the matching budget
  stop, with the usage spent and the messages so far in the audit trail.
- An agent run that fails (a model or tool error) or is cut (``Engine.cancel()``,
  the time budget) records what its responses so far cost with
  ``ctx.record_usage``: it still counts toward the run's budgets.
- Tool calls inside the agent are invocations ``NAME.TOOL``
  (:attr:`engine.Effect.tool_calls`): ``per_suggestor`` limits of a tool and the
  invocation budget are enforced before the tool runs.

:func:`call_agent` is the building block: one agent run under the run's budgets,
for suggestors that call an agent several times (see
``examples/dependency_audit/reviewer.py``).

The modules: :mod:`~converge.agents.suggestor` (the suggestor and its builders),
:mod:`~converge.agents.call` (one agent run), :mod:`~converge.agents.ledger`
(what a cycle's agent runs spend and the tools they call) and
:mod:`~converge.agents.pricing` (what a model costs).
"""

from __future__ import annotations

from engine import ConfigurationError

try:
    from converge.agents.call import MAX_AUDITED_MESSAGES_CHARS, AgentCall, call_agent, usage_of
    from converge.agents.ledger import CycleSpend, cycle_spend
    from converge.agents.pricing import Price, model_label, priceable
    from converge.agents.suggestor import (
        AgentSuggestor,
        PromptSpec,
        agent_suggestor,
        build_agent,
        default_prompt,
        to_proposals,
    )
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ConfigurationError(
        "LLM agents need the 'agents' extra: pip install 'converge-engine[agents]' "
        f"({exc.name} is missing)"
    ) from exc

__all__ = [
    "MAX_AUDITED_MESSAGES_CHARS",
    "AgentCall",
    "AgentSuggestor",
    "CycleSpend",
    "Price",
    "PromptSpec",
    "agent_suggestor",
    "build_agent",
    "call_agent",
    "cycle_spend",
    "default_prompt",
    "model_label",
    "priceable",
    "to_proposals",
    "usage_of",
]
