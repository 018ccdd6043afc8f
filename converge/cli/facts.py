"""``converge facts`` and ``converge lineage``: a run's facts with their provenance,
and the facts one was derived from, as a tree."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from audit.queries import fork_link, lineage_graph, mark_inherited
from converge.cli.actors import ReaderTokenOption
from converge.cli.decided import decisions
from converge.cli.markup import escape
from converge.cli.reading import RunArgument, print_json, read_run, warn_if_tampered
from converge.cli.render import DbOption, JsonOption, failing_on, out, print_fitted
from converge.cli.tables import Column
from engine import ConvergeError, Fact, fact_to_dict

if TYPE_CHECKING:
    import networkx as nx
    from rich.tree import Tree

__all__ = ["FACT_COLUMNS", "facts_cmd", "lineage_cmd"]


def facts_cmd(
    run_id: RunArgument,
    key: Annotated[str | None, typer.Option("--key", help="Only facts of this key.")] = None,
    db: DbOption = None,
    as_json: JsonOption = False,
    token: ReaderTokenOption = None,
) -> None:
    """The facts of a run, in promotion order, with provenance; beside a fact a
    person's decision promoted, its gate, who decided and why (and beside the facts
    derived from it, that gate)."""
    from converge.access import sight
    from converge.values import readable

    store, run_id, person = read_run(db, token, run_id)
    with failing_on(ConvergeError):
        every = store.facts(run_id)
        seen = sight(store, person, [run_id])
        decided = decisions(store, run_id, every)
    facts = every if key is None else [f for f in every if f.key == key]
    warn_if_tampered(store, run_id, every)
    if as_json:
        print_json(seen([fact_to_dict(f) | decided.json_of(f.id) for f in facts]))
        return
    hidden = {g.gate_id for g in seen.hidden}
    rows = [
        (
            f.id,
            f.key,
            readable(seen(f.content)),
            f"{f.confidence:g}",
            f.provenance.suggestor,
            str(f.provenance.cycle),
            ", ".join(f.provenance.parents),
            decided.of(f.id, hidden),
        )
        for f in facts
    ]
    print_fitted(f"facts of {run_id} ({len(facts)})", FACT_COLUMNS, rows)


FACT_COLUMNS = (
    Column("id", whole=True),
    # a fact's id starts with its key: the first column dropped, with conf
    Column("key", priority=5, whole=True),
    # the content gets the room; it folds, nothing is cut
    Column("content", floor=24),
    Column("conf", priority=4, justify="right", whole=True),
    Column("suggestor", priority=1, whole=True),
    Column("cycle", priority=2, justify="right", whole=True),
    Column("parents", priority=3, floor=16, optional=True),
    # who decided it, kept over the provenance's detail when the width is short
    Column("decided", floor=24, optional=True),
)


def lineage_cmd(
    run_id: RunArgument,
    fact_id: Annotated[str, typer.Argument(help="The fact (e.g. license#3).")],
    db: DbOption = None,
    as_json: JsonOption = False,
    token: ReaderTokenOption = None,
) -> None:
    """The facts a fact was derived from, as a tree (its parents, their parents...);
    in a fork, the facts taken from its parent name the parent run."""
    from converge.access import sight

    store, run_id, person = read_run(db, token, run_id)
    with failing_on(ConvergeError):
        link = fork_link(store, run_id)
        every = store.facts(run_id)
        graph = mark_inherited(lineage_graph(every, fact_id), link)
        seen = sight(store, person, [run_id])
        decided = decisions(store, run_id, every)
    warn_if_tampered(store, run_id, every)
    if as_json:
        print_json(
            seen(
                {
                    "fact": fact_id,
                    "forked_from": None if link is None else link.to_dict(),
                    "nodes": [
                        (
                            fact_to_dict(d["fact"])
                            | ({"run": d["run"]} if "run" in d else {})
                            | (decided.json_of(n) if n in decided.promoted else {})
                        )
                        if "fact" in d
                        else {"id": n, "missing": True}
                        for n, d in graph.nodes(data=True)
                    ],
                    "edges": [[a, b] for a, b in graph.edges],
                }
            )
        )
        return
    if link is not None:
        out.print(f"[dim]{escape(str(link))}: facts of cycles <= {link.cycle} are its[/]")
    hidden = {g.gate_id for g in seen.hidden}
    labels = {
        n: _label(graph, n, decided.of(n, hidden) if n in decided.promoted else "")
        for n in graph.nodes
    }
    out.print(_lineage_tree(graph, fact_id, labels))


def _label(graph: nx.DiGraph[str], node: str, decision: str) -> str:
    """A node of the tree: the fact, its content and provenance, and ``decision``
    (the gate that promoted it, who decided and why) when a person's decision did."""
    from converge.values import readable

    fact: Fact | None = graph.nodes[node].get("fact")
    if fact is None:
        return f"[red]{escape(node)}[/] (not recorded)"
    p = fact.provenance
    parent = graph.nodes[node].get("run")  # taken from the parent run (a fork's)
    where = "" if parent is None else f", from run {escape(parent)}"
    decided = f" [yellow]{escape(decision)}[/]" if decision else ""
    return (
        f"[bold]{escape(fact.id)}[/] = {escape(readable(fact.content))} "
        f"[dim]({escape(p.suggestor)}, cycle {p.cycle}{where})[/]{decided}"
    )


def _lineage_tree(graph: nx.DiGraph[str], fact_id: str, labels: dict[str, str]) -> Tree:
    """The fact at the root, its parents below it (a node seen twice is not expanded
    again), each with its ``labels``."""
    from rich.tree import Tree

    root = Tree(labels[fact_id])
    seen = {fact_id}
    todo: list[tuple[Tree, str]] = [(root, fact_id)]
    while todo:
        branch, node = todo.pop()
        for parent in sorted(graph.predecessors(node)):
            if parent in seen:
                branch.add(labels[parent] + " [dim](above)[/]")
                continue
            seen.add(parent)
            todo.append((branch.add(labels[parent]), parent))
    return root
