"""Forks read back: a fork's link to its parent, the forks of a run, inherited facts.

A fork (``Engine.fork``, ``converge fork``) chains its link to the parent in its
``run_started`` event: ``forked_from: {run, cycle, facts_root, ...}``. Listings show
it for many runs at once, so :func:`fork_links` reads only the head of each fork's
first event (canonical JSON sorts ``forked_from`` before the copied
``initial_facts`` of a fork recorded before issue 46, which can be megabytes; a
fork now refers to its parent's facts, its event is small) and parses the whole
event only when the head does not hold the link. The facts a fork took from its parent are those
of cycles up to the fork point: :func:`mark_inherited` names the parent run on
them in a lineage graph.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select

from audit.cells import loads
from audit.core import StoreCore
from audit.tables import audit_events, runs

if TYPE_CHECKING:
    import networkx as nx

__all__ = ["ForkLink", "fork_link", "fork_links", "forks_of", "mark_inherited"]

HEAD_CHARS = 4096
"""Characters of a fork's ``run_started`` read to find its link (the keys before
``forked_from`` are the budget and the Merkle scheme: a few hundred characters)."""

_KEY = '"forked_from":'
_IN_CLAUSE = 500  # run ids per query
_decoder = json.JSONDecoder()


@dataclass(frozen=True, slots=True)
class ForkLink:
    """A fork's link, as chained: ``fork`` was started from the state after
    ``cycle`` of ``parent``, whose facts up to there have Merkle root ``facts_root``."""

    fork: str
    parent: str
    cycle: int
    facts_root: str | None

    def to_dict(self) -> dict[str, Any]:
        """``{"run", "cycle", "facts_root"}``: the ``forked_from`` of the chain."""
        return {"run": self.parent, "cycle": self.cycle, "facts_root": self.facts_root}

    def short(self) -> str:
        """``PARENT@CYCLE``, the parent by its id's first 8 characters (a prefix any
        command takes)."""
        return f"{self.parent[:8]}@{self.cycle}"

    def __str__(self) -> str:
        return f"forked from {self.parent} at cycle {self.cycle}"


def _link(fork: str, data: Any) -> ForkLink | None:
    if not isinstance(data, dict):
        return None
    parent, cycle = data.get("run"), data.get("cycle")
    if not isinstance(parent, str) or type(cycle) is not int:
        return None
    root = data.get("facts_root")
    return ForkLink(fork, parent, cycle, root if isinstance(root, str) else None)


def _from_head(fork: str, head: str) -> ForkLink | bool | None:
    """The link in the first characters of a ``run_started`` payload: a link, None
    (the payload has none), or False (not decidable from the head: read it whole)."""
    at = head.find(_KEY)
    if at < 0:
        return False if len(head) >= HEAD_CHARS else None
    try:
        data, _end = _decoder.raw_decode(head, at + len(_KEY))
    except ValueError:  # cut by the head's end
        return False
    return _link(fork, data) or False


def fork_links(store: StoreCore, run_ids: Iterable[str]) -> dict[str, ForkLink]:
    """The chained link of each run of ``run_ids`` that is a fork (others are left
    out), read in one query per 500 runs; a ``run_started`` that cannot be read is
    left out too (``converge verify`` names it). Give it forks (runs whose row
    names a parent): another run's first event may be read whole."""
    ids = list(dict.fromkeys(run_ids))
    ev = audit_events.c
    out: dict[str, ForkLink] = {}
    with store.transaction(write=False) as conn:
        for i in range(0, len(ids), _IN_CLAUSE):
            part = ids[i : i + _IN_CLAUSE]
            rows = conn.execute(
                select(ev.run_id, func.substr(ev.payload, 1, HEAD_CHARS)).where(
                    ev.run_id.in_(part), ev.seq == 1, ev.kind == "run_started"
                )
            ).all()
            for run_id, head in rows:
                found = _from_head(run_id, head or "")
                if found is False:
                    whole = conn.execute(
                        select(ev.payload).where(ev.run_id == run_id, ev.seq == 1)
                    ).scalar()
                    try:
                        found = _link(run_id, loads(whole or "{}").get("forked_from"))
                    except (ValueError, AttributeError):
                        found = None
                if isinstance(found, ForkLink):
                    out[run_id] = found
    return out


def fork_link(store: StoreCore, run_id: str) -> ForkLink | None:
    """The link of ``run_id`` to its parent, None when it is no fork (its ``runs``
    row names no parent) or no such run."""
    with store.transaction(write=False) as conn:
        parent = conn.execute(select(runs.c.parent_run_id).where(runs.c.run_id == run_id)).scalar()
    return None if parent is None else fork_links(store, [run_id]).get(run_id)


def forks_of(store: StoreCore, run_id: str) -> list[ForkLink]:
    """The forks of ``run_id`` (runs whose ``runs`` row names it as parent and whose
    chain links to it), oldest first."""
    with store.transaction(write=False) as conn:
        children = list(
            conn.execute(
                select(runs.c.run_id)
                .where(runs.c.parent_run_id == run_id)
                .order_by(runs.c.started_at, runs.c.run_id)
            ).scalars()
        )
    links = fork_links(store, children)
    return [links[c] for c in children if c in links and links[c].parent == run_id]


def mark_inherited(graph: nx.DiGraph[str], link: ForkLink | None) -> nx.DiGraph[str]:
    """``graph`` (a lineage, nodes carrying ``fact``) with ``run`` = the parent's id
    on every fact the fork took from its parent (promoted up to the fork's cycle);
    unchanged when ``link`` is None."""
    if link is None:
        return graph
    for _node, data in graph.nodes(data=True):
        fact = data.get("fact")
        if fact is not None and fact.provenance.cycle <= link.cycle:
            data["run"] = link.parent
    return graph
