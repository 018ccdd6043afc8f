"""Lineage of a fact: the facts it was derived from, as a networkx graph.

Edges go parent → child, from each fact's ``provenance.parents`` (as declared by
the suggestor that proposed it). The graph holds the fact and all its ancestors;
each node carries ``fact`` (the :class:`engine.Fact`) as an attribute.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from engine.errors import ConvergeError
from engine.facts import Fact

if TYPE_CHECKING:
    import networkx as nx


def lineage_graph(facts: Iterable[Fact], fact_id: str) -> nx.DiGraph[str]:
    """The ancestors of ``fact_id`` and the fact itself, edges parent → child.

    A parent id that names no recorded fact stays a node without ``fact``.
    Raises ``ConvergeError`` when ``fact_id`` is not among ``facts``.
    """
    by_id = {f.id: f for f in facts}
    if fact_id not in by_id:
        raise ConvergeError(f"no fact {fact_id!r} in this run")
    import networkx  # on first use: an import of ~0.2 s no other command needs

    g: nx.DiGraph[str] = networkx.DiGraph()
    g.add_node(fact_id, fact=by_id[fact_id])
    todo = [fact_id]
    while todo:
        child = todo.pop()
        f = by_id.get(child)
        if f is None:
            continue
        for parent in f.provenance.parents:
            if parent not in g:
                pf = by_id.get(parent)
                if pf is not None:
                    g.add_node(parent, fact=pf)
                else:
                    g.add_node(parent)
                todo.append(parent)
            g.add_edge(parent, child)
    return g
