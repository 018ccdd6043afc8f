"""Who may see and do what: one access policy, asked by every surface (the JSON API,
the pages, the event streams, the command line, the Python helpers the CLI uses).

- :mod:`converge.access._policy`: the policy itself, a pure function
  (:func:`permits`) of a :class:`Person` (name, :class:`Role`, groups), an
  :class:`Action` and a resource (:class:`RunView`, :class:`GateView` or
  :data:`STORE`); deny by default; :data:`GRANTS` is the role table of
  docs/access.md;
- :mod:`converge.access._operations`: the routes that act for nobody
  (:data:`PUBLIC_ROUTES`: sign-in, the probes) and who reads the metrics
  (:class:`MetricsAccess`, :func:`metrics_open`);
- :mod:`converge.access._rules`: a gate's recorded rules (:class:`DecisionRules`);
- :mod:`converge.access._views`: what a person who sees a run but may not read one
  of its gates sees of it (:func:`gate_stub`, :func:`redacted`,
  :func:`event_as_seen`);
- :mod:`converge.access._asking`: asking from a surface: the values gathered from
  the store (:func:`person_of`, :func:`run_view`, :func:`gate_view`), a refusal
  logged and raised as :class:`converge.errors.NotAllowed` (:func:`ask`), or a
  filter's quiet answer (:func:`check`).
"""

from __future__ import annotations

from converge.access._asking import (
    ASKED,
    Sight,
    ask,
    check,
    decision_verdict,
    gate_view,
    job_view,
    person_of,
    run_view,
    run_views,
    seen_by,
    sight,
    visible_to_of,
)
from converge.access._operations import LOOPBACK, PUBLIC_ROUTES, MetricsAccess, metrics_open
from converge.access._policy import (
    GRANTS,
    STORE,
    VERBS,
    Action,
    GateView,
    Person,
    Resource,
    Role,
    RunView,
    StoreScope,
    Verdict,
    permits,
)
from converge.access._rules import DecisionRules
from converge.access._views import RESTRICTED, event_as_seen, gate_stub, redacted

__all__ = [
    "ASKED",
    "GRANTS",
    "LOOPBACK",
    "PUBLIC_ROUTES",
    "RESTRICTED",
    "STORE",
    "VERBS",
    "Action",
    "DecisionRules",
    "GateView",
    "MetricsAccess",
    "Person",
    "Resource",
    "Role",
    "RunView",
    "Sight",
    "StoreScope",
    "Verdict",
    "ask",
    "check",
    "decision_verdict",
    "event_as_seen",
    "gate_stub",
    "gate_view",
    "job_view",
    "metrics_open",
    "permits",
    "person_of",
    "redacted",
    "run_view",
    "run_views",
    "seen_by",
    "sight",
    "visible_to_of",
]
