"""What the pages and the JSON API show, built once for both (plain dicts and pictures).

Listing gates applies the deadlines that passed first (``converge.decisions``),
so an expired gate is shown ``expired`` with its ``on_timeout`` decision recorded.
"""

from __future__ import annotations

import time
from typing import Any

import networkx as nx
from markupsafe import Markup

from audit.people import Comment, Vote, deciding_vote, run_comments, votes_on
from audit.queries import (
    UnreadableGate,
    lineage_graph,
    read_gates,
    read_runs,
    timeline,
)
from audit.store import SqlRunStore
from converge.access import (
    RESTRICTED,
    Action,
    DecisionRules,
    Person,
    ask,
    check,
    gate_stub,
    gate_view,
    run_view,
    run_views,
    seen_by,
)
from converge.decisions import Clock, approvals_required, is_expired, job_of_run
from converge.explaining import counts_of, explain_stop
from converge.jobs import Job
from converge.reports import build_reports, readable
from converge.web.pictures import budget_svg, cycle_of, graph_svg
from converge.web.run_budget import run_budget
from engine import ConvergeError, CorruptRow, Fact, GateRecord
from engine.facts import fact_to_dict
from engine.status import GateStatus, RunStatus


class GateLookups:
    """What :func:`gate_dict` reads for a page of gates, each read once: the votes
    on all of them (one query), and per run its job and its comments."""

    def __init__(
        self,
        store: SqlRunStore,
        gates: list[GateRecord],
        votes: dict[str, list[Vote]] | None = None,
        *,
        jobs: dict[str, Job | None] | None = None,
        comments: dict[str, list[Comment] | CorruptRow] | None = None,
    ) -> None:
        self.store = store
        self.corrupt_votes: dict[str, CorruptRow] = {}
        if votes is None:
            votes = votes_on(store, [g.gate_id for g in gates], self.corrupt_votes)
        self.votes = votes
        self._jobs: dict[str, Job | None] = dict(jobs or {})
        self._comments: dict[str, list[Comment] | CorruptRow] = dict(comments or {})

    @classmethod
    def known(
        cls,
        store: SqlRunStore,
        gate: GateRecord,
        votes: list[Vote],
        job: Job | None,
        comments: list[Comment],
    ) -> GateLookups:
        """The lookups of one gate whose votes, job and run's comments are known
        already (a decision's answer: what it recorded and was checked against)."""
        return cls(
            store,
            [gate],
            {gate.gate_id: votes},
            jobs={gate.run_id: job},
            comments={gate.run_id: comments},
        )

    def job(self, run_id: str) -> Job | None:
        """The job the run recorded (None when it recorded none that loads)."""
        if run_id not in self._jobs:
            try:
                self._jobs[run_id] = job_of_run(self.store, run_id)
            except ConvergeError:
                self._jobs[run_id] = None
        return self._jobs[run_id]

    def comments(self, g: GateRecord) -> list[Comment]:
        """The comments on gate ``g``, oldest first; ``CorruptRow`` when one of its
        run's cannot be read."""
        if g.run_id not in self._comments:
            try:
                self._comments[g.run_id] = run_comments(self.store, g.run_id)
            except CorruptRow as exc:
                self._comments[g.run_id] = exc
        found = self._comments[g.run_id]
        if isinstance(found, CorruptRow):
            raise found
        return [c for c in found if c.gate_id == g.gate_id]

    def check_votes(self, g: GateRecord) -> None:
        """``CorruptRow`` when a vote on gate ``g`` cannot be read."""
        if g.gate_id in self.corrupt_votes:
            raise self.corrupt_votes[g.gate_id]


def vote_dict(v: Vote) -> dict[str, Any]:
    """A vote as JSON: ``by``, ``approved``, ``reason``, ``at`` (unix seconds)."""
    return {"by": v.voter, "approved": v.approved, "reason": v.reason, "at": v.ts}


def gate_dict(
    store: SqlRunStore,
    g: GateRecord,
    *,
    clock: Clock = time.time,
    lookups: GateLookups | None = None,
) -> dict[str, Any]:
    """A gate as JSON: the stored record, its votes, quorum and age (seconds), its
    comments; ``lookups`` shares the reads of a page of gates. Raises
    ``CorruptRow`` when one of its votes or its run's comments cannot be read."""
    now = clock()
    known = GateLookups(store, [g]) if lookups is None else lookups
    known.check_votes(g)
    recorded = known.job(g.run_id)
    cast = known.votes.get(g.gate_id, [])
    required = approvals_required(recorded, g)
    approvals = sum(1 for v in cast if v.approved)
    deciding = deciding_vote(cast, required) if required > 1 else None
    rules = DecisionRules.of(g)
    allowed = rules.approvers_at(g, now)
    return {
        "gate_id": g.gate_id,
        "run_id": g.run_id,
        "job": recorded.name if recorded else None,
        "status": GateStatus.EXPIRED if is_expired(g, now) else g.status,
        "summary": g.summary,
        "suggestor": g.suggestor,
        "cycle": g.cycle,
        "policy": g.policy,
        "proposal_id": g.proposal_id,
        "proposal": g.proposal,
        "opened_at": g.opened_at,
        "age_s": max(now - g.opened_at, 0.0),
        "expires_at": g.expires_at,
        "on_timeout": g.on_timeout,
        "decided_by": g.decided_by,
        "decided_at": g.decided_at,
        "reason": g.reason,
        "approvals_required": required,
        "approvals": [vote_dict(v) for v in cast],
        "still_needed": max(required - approvals, 0) if g.status == GateStatus.PENDING else 0,
        # decisive votes on a gate still pending: the process that recorded the
        # deciding vote stopped before resuming the run; its voter may apply it
        "deciding_vote": None
        if g.status != GateStatus.PENDING or deciding is None
        else vote_dict(deciding),
        "approvers": None if allowed is None else sorted(allowed),
        "four_eyes": rules.four_eyes,
        "reason_required": rules.reason_required,
        "escalated": rules.escalated(g, now),
        "comments": [{"by": c.by, "at": c.ts, "text": c.text} for c in known.comments(g)],
    }


def unreadable_dict(gate: UnreadableGate) -> dict[str, Any]:
    """A gate that cannot be read, as a list of gates shows it: ``{"gate_id",
    "run_id", "status": "unreadable", "column", "error"}``. The error names the
    cell, not its value: a person who may not see the gate reads no part of it."""
    e = gate.error
    return {
        "gate_id": gate.gate_id,
        "run_id": gate.run_id,
        "status": UNREADABLE,
        "column": e.column,
        "error": f"{e.row}: cannot read {e.table}.{e.column} (converge verify names it)",
        "may_decide": False,
    }


UNREADABLE = "unreadable"
"""The ``status`` of a gate that cannot be read, in a list of gates."""


def gates_list(
    store: SqlRunStore, status: str | None, clock: Clock = time.time, who: Person | None = None
) -> list[dict[str, Any]]:
    """Gates newest first, filtered by ``status`` (None = all) and, given ``who``, to
    those that person may read (the access policy; ``may_decide`` says which they may
    decide); a gate past its deadline shows ``expired`` (the process keeping the
    deadlines decides it). A gate that cannot be read (a corrupt cell of it, of its
    votes or of its run's comments) is :func:`unreadable_dict` in its place, whatever
    ``status`` asks, when ``who`` may see its run."""
    now = clock()
    found = read_gates(store, pending=status == GateStatus.PENDING)
    runs = {} if who is None else run_views(store, {g.run_id for g in found if g.run_id})
    deciding: dict[str, bool] = {}
    shown: list[GateRecord] = []
    for g in found:
        if not isinstance(g, GateRecord) or (status is not None and g.status != status):
            continue
        if who is None:
            deciding[g.gate_id] = True
            shown.append(g)
            continue
        view = gate_view(g, runs[g.run_id], now)
        if check(who, Action.READ_GATE, view):
            deciding[g.gate_id] = check(who, Action.DECIDE, view).allowed
            shown.append(g)
    lookups = GateLookups(store, shown)
    out: list[dict[str, Any]] = []
    for g in found:
        if isinstance(g, UnreadableGate):
            # its error names a cell, never its content: shown to whoever sees its run
            if who is None or g.run_id is None or check(who, Action.SEE_RUN, runs[g.run_id]):
                out.append(unreadable_dict(g))
            continue
        if g.gate_id not in deciding:
            continue
        try:
            row = gate_dict(store, g, clock=clock, lookups=lookups)
        except CorruptRow as exc:
            out.append(unreadable_dict(UnreadableGate(g.gate_id, g.run_id, exc)))
            continue
        row["may_decide"] = deciding[g.gate_id]
        out.append(row)
    return out


def _fact_node(graph: nx.DiGraph[str], f: Fact) -> None:
    graph.add_node(f.id, label=f.key, detail=f.content, fact=f)


def gate_page_data(
    store: SqlRunStore,
    gate_id: str,
    clock: Clock = time.time,
    who: Person | None = None,
    *,
    client: str | None = None,
) -> dict[str, Any]:
    """The gate page: the gate, the facts its proposal derives from, its lineage picture.

    A gate past its deadline shows ``expired``. Raises ``GateNotFound``, and
    ``NotAllowed`` when ``who`` may not read it (recorded in the access log with
    ``client``).
    """
    g = store.get_gate(gate_id)
    deciding = None
    if who is not None:
        view = gate_view(g, run_view(store, g.run_id), clock())
        ask(store, who, Action.READ_GATE, view, client=client)
        deciding = check(who, Action.DECIDE, view)
    data = gate_dict(store, g, clock=clock)
    data["may_decide"] = deciding is None or deciding.allowed
    data["why_not"] = None if deciding is None or deciding.allowed else deciding.reason
    facts = store.facts(g.run_id)
    by_id = {f.id: f for f in facts}
    parent_ids = [str(p) for p in g.proposal.get("parents", [])]
    parents = [by_id[p] for p in parent_ids if p in by_id]
    graph: nx.DiGraph[str] = nx.DiGraph()
    for parent in parents:
        sub = lineage_graph(facts, parent.id)
        for node in sub.nodes:
            if "fact" in sub.nodes[node]:
                _fact_node(graph, sub.nodes[node]["fact"])
            else:
                graph.add_node(node, label=node, detail="(not recorded)")
        graph.add_edges_from(sub.edges)
    node = f"proposal:{g.proposal_id}"
    graph.add_node(
        node, label=f"{g.proposal.get('key')} (waiting)", detail=g.proposal.get("content")
    )
    for p in parent_ids:
        if p not in graph:
            graph.add_node(p, label=p, detail="(not recorded)")
        graph.add_edge(p, node)
    run = store.run(g.run_id)
    data["value"] = decision_values(store.events(g.run_id, ["gate_decided"])).get(gate_id)
    data.update(
        proposal_fields=fields(g.proposal.get("content")),
        parents=[{**fact_to_dict(p), "content_text": readable(p.content)} for p in parents],
        lineage_svg=graph_svg(graph, title=f"lineage of gate {gate_id}", highlight=node),
        run_status=run.status,
        run_kind=run.kind,
    )
    return data


def fields(content: Any) -> list[tuple[str, str]]:
    """A proposal's content as the rows of a key/value table: ``(name, value)`` per
    field of a mapping (values as :func:`converge.reports.readable`), one row
    ``("value", text)`` for anything else."""
    if isinstance(content, dict):
        return [(str(k), readable(v, str(k))) for k, v in content.items()]
    return [("value", readable(content))]


def decision_values(events: list[Any]) -> dict[str, str]:
    """The human answers (``--value``, the inbox's Answer) of the decisions among
    ``events``: gate id → the value as a person reads it."""
    return {
        str(e.payload.get("gate_id")): readable(e.payload["value"])
        for e in events
        if e.kind == "gate_decided" and e.payload.get("value") is not None
    }


def report_tables(job: Job | None, facts: list[Fact]) -> list[dict[str, Any]]:
    """The ``report:`` tables of ``job`` (the one the run recorded) over ``facts``,
    as ``converge run`` prints them: ``[{"title", "key", "columns", "rows"}]`` ([]
    without a job)."""
    if job is None:
        return []
    return [
        {"title": r.title, "key": r.key, "columns": r.columns, "rows": r.rows}
        for r in build_reports(job.spec.report, facts)
    ]


def runs_list(
    store: SqlRunStore,
    *,
    category: str | None,
    kind: str | None,
    job: str | None,
    who: Person | None = None,
) -> list[dict[str, Any]]:
    """Recorded runs, newest first, filtered by stop ``category``, ``kind`` and ``job``
    and, given ``who``, to the runs that person may see (the access policy); a row
    that cannot be read is ``{"run_id", "error", "column"}`` in its place."""
    rows = [r.to_dict() for r in read_runs(store, category=category, kind=kind, job=job)]
    if who is None:
        return rows
    views = run_views(store, (r["run_id"] for r in rows))
    return [r for r in rows if check(who, Action.SEE_RUN, views[r["run_id"]])]


def key_graph(facts: list[Fact]) -> nx.DiGraph[str]:
    """The run's lineage by key: an edge ``a → b`` when a ``b`` fact derives from an ``a`` one."""
    key_of = {f.id: f.key for f in facts}
    counts: dict[str, int] = {}
    graph: nx.DiGraph[str] = nx.DiGraph()
    for f in facts:
        counts[f.key] = counts.get(f.key, 0) + 1
        graph.add_node(f.key)
        for p in f.provenance.parents:
            if p in key_of and key_of[p] != f.key:
                graph.add_edge(key_of[p], f.key)
    for key, n in counts.items():
        graph.nodes[key].update(label=key, detail=f"{n} fact{'s' if n != 1 else ''}")
    # keys that derive from each other (a cycle) are drawn too: graph_svg arcs them
    return graph


def lineage_note(graph: nx.DiGraph[str]) -> str:
    """What the run page says under its lineage by key: why it is empty, or the
    cycle its keys derive along ("" when the picture says it all)."""
    if graph.number_of_nodes() == 0:
        return "No facts yet."
    cycle = cycle_of(graph)
    if cycle is not None:
        return (
            f"Its keys derive from each other in a cycle ({' → '.join(cycle)}): "
            "the dashed arcs go back to the key a fact was derived from."
        )
    if graph.number_of_edges() == 0:
        return "No fact derives from a fact of another key."
    return ""


def run_page_data(
    store: SqlRunStore,
    run_id: str,
    clock: Clock = time.time,
    who: Person | None = None,
    *,
    client: str | None = None,
) -> dict[str, Any]:
    """The run page: the run, its timeline, stop reason and explain, budget, lineage,
    its gates (with each decision's ``value``) and its job's report tables; given
    ``who``, as that person may see it (the access policy: a gate they may not read
    is its stub, and nothing else of it is shown).

    Raises ``RunNotFound``, and ``NotAllowed`` when ``who`` may not see the run
    (recorded in the access log with ``client``).
    """
    if who is None:
        return {**_run_page(store, run_id, clock), "may_fork": True, "may_cancel": True}
    run = run_view(store, run_id)
    ask(store, who, Action.SEE_RUN, run, client=client)
    data = _run_page(store, run_id, clock)
    data["may_fork"] = check(who, Action.FORK_RUN, run).allowed
    data["may_cancel"] = check(who, Action.CANCEL_RUN, run).allowed
    seen: dict[str, Any] = seen_by(store, who, data, [run_id], clock())
    seen["gates"] = [gate_stub(g) if g.get(RESTRICTED) else g for g in seen["gates"]]
    return seen


def _run_page(store: SqlRunStore, run_id: str, clock: Clock) -> dict[str, Any]:
    row = store.run(run_id)
    events = store.events(run_id)
    status = run_budget(store, run_id, events, clock())
    reason = row.stop_reason
    facts = store.facts(run_id)
    found = read_gates(store, run_ids=[run_id])
    run_gates = [g for g in found if isinstance(g, GateRecord)]
    lookups = GateLookups(store, run_gates)
    values = decision_values(events)
    gates = [_run_gate(store, g, clock, lookups) for g in found]
    for g in gates:
        g["value"] = values.get(g["gate_id"])
    cycles = timeline(events)
    by_key = key_graph(facts)
    return {
        "run": row.to_dict(),
        # queued, running, or paused with its gate decided (its resume on its way)
        "live": row.status in (RunStatus.QUEUED, RunStatus.RUNNING)
        or (
            row.status == RunStatus.PAUSED
            and not any(g.status == GateStatus.PENDING for g in run_gates)
        ),
        "stop": None if reason is None else str(reason),
        "explain": None if reason is None else explain_stop(reason, counts_of(cycles)),
        "timeline": [c.to_dict() for c in cycles],
        "budget_status": None if status is None else status.model_dump(mode="json"),
        "budget_svg": Markup("") if status is None else budget_svg(status),
        "lineage_svg": graph_svg(by_key, title=f"lineage of run {run_id} by key"),
        "lineage_note": lineage_note(by_key),
        "gates": gates,
        "reports": report_tables(lookups.job(run_id), facts),  # the job read once
    }


def _run_gate(
    store: SqlRunStore, g: GateRecord | UnreadableGate, clock: Clock, lookups: GateLookups
) -> dict[str, Any]:
    """A gate of the run page: :func:`gate_dict`, or :func:`unreadable_dict`."""
    if isinstance(g, UnreadableGate):
        return unreadable_dict(g)
    try:
        return gate_dict(store, g, clock=clock, lookups=lookups)
    except CorruptRow as exc:
        return unreadable_dict(UnreadableGate(g.gate_id, g.run_id, exc))
