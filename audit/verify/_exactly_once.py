"""What exactly-once means for a recorded run, checked by ``converge verify``.

A run is continued by one process at a time (the claim of :mod:`audit.trail._gates`) and
each fact id is promoted once (the fence, and crash recovery refusing a replayed
fact that differs), so its chain must show:

- no fact id twice (a fact promoted again by a second process or a replay);
- every ``run_resumed`` after the previous leg ended (``run_stopped`` /
  ``run_paused``), or marked as the recovery of a crashed leg or as the first
  leg of a fork recorded ``queued`` (right after its checkpoint), or applying a
  gate's decision right as its leg starts: two legs running at once mean two
  processes continued the run;
- at each stop or pause, the facts root it recorded equal to the Merkle root of
  the facts promoted before it (initial facts included), so the recorded stop and
  the recorded facts agree (but for a stop by a failing store, which holds only a
  prefix of the run's facts), under the scheme its ``run_started`` names
  (``engine.hashing.merkle``: RFC 6962, or LEGACY for runs recorded before). A
  fork's facts taken from its parent are not in its chain: its ``forked_from``
  carries their Merkle frontier (``facts.frontier``, whose root must be its
  ``facts_root``), which the fork's own facts extend, so a fork checks alone,
  its parent deleted or not.

The first violation is reported as ``(seq, why)`` (the event that shows it).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from audit.trail import TERMINAL, ChainRow
from audit.verify._crosscheck import Problem
from engine.facts import canonical_json
from engine.hashing.commitment import fact_commitment, text_commitment
from engine.hashing.merkle import (
    LEAF_PREFIX,
    LEGACY,
    SALTED,
    MerkleFrontier,
    commitment_leaf,
    merkle_scheme,
)

__all__ = ["check_exactly_once"]


def check_exactly_once(rows: Sequence[ChainRow]) -> Problem:
    """The first exactly-once violation in a run's chained ``rows`` (None: none)."""
    sha = hashlib.sha256
    seen: dict[str, int] = {}
    tree = MerkleFrontier(scheme=LEGACY)
    leaves: list[bytes] = []  # appended to the tree at the next stop
    leg_open = False
    previous = ""
    scheme = LEGACY
    leaf_prefix = LEAF_PREFIX[scheme]
    for row in rows:
        kind = row.kind
        if kind == "fact_promoted":
            fact_id = json.loads(row.payload).get("id")  # None: redacted
            if fact_id in seen:
                return row.seq, (
                    f"fact {fact_id} promoted twice (events {seen[fact_id]} and {row.seq})"
                )
            if fact_id is not None:
                seen[fact_id] = row.seq
            if scheme == SALTED:  # the leaf is its commitment (engine.hashing.commitment)
                leaves.append(commitment_leaf(text_commitment(row.payload)))
            else:
                leaves.append(sha(leaf_prefix + row.payload.encode()).digest())
        elif kind == "run_started":
            started = json.loads(row.payload)
            try:  # the run's facts root scheme (engine.hashing.merkle), for its whole life
                scheme = merkle_scheme(started.get("facts_merkle"))
            except ValueError as exc:
                return row.seq, str(exc)
            leaf_prefix = LEAF_PREFIX[scheme]
            taken = _taken(started, scheme)
            if taken is None:
                return row.seq, "forked_from.facts is not the frontier of its facts_root"
            tree, leaves = taken, []
            for fact in started.get("initial_facts", ()):
                if isinstance(fact, dict) and "id" in fact:
                    seen.setdefault(str(fact.get("id")), row.seq)
                if scheme == SALTED:
                    leaves.append(commitment_leaf(fact_commitment(fact)))
                else:
                    leaves.append(sha(leaf_prefix + canonical_json(fact).encode()).digest())
            leg_open = True
        elif kind == "run_resumed":
            p = json.loads(row.payload)
            # a decision applied as the leg that loaded it starts (resume_run of a run
            # whose gate was decided meanwhile) is that leg's, not a new one
            applied = "gate_id" in p and previous == "run_resumed"
            # a crashed leg's recovery, or a queued fork's first leg (its start only before)
            first = p.get("from") == "queued" and previous == "checkpoint_saved"
            if leg_open and p.get("from") != "crash" and not applied and not first:
                return row.seq, "run resumed while its previous leg had not stopped"
            leg_open = True
        elif kind in TERMINAL:
            leg_open = False
            p = json.loads(row.payload)
            recorded = p.get("facts_root")
            reason = p.get("reason")
            if isinstance(reason, dict) and reason.get("error_category") == "storage":
                recorded = None  # the store failed: it holds a prefix of the run's facts
            if recorded is not None and recorded != _root(tree, leaves):
                return row.seq, "facts root differs from the facts promoted before this stop"
        previous = kind
    return None


def _taken(started: dict[str, object], scheme: str) -> MerkleFrontier | None:
    """The Merkle frontier a run's facts start from: empty, or a fork's frontier of
    the facts it refers to in its parent (None when it is malformed, or its root is
    not the ``facts_root`` the fork recorded)."""
    link = started.get("forked_from")
    ref = link.get("facts") if isinstance(link, dict) else None
    if not isinstance(ref, dict) or started.get("initial_facts"):
        return MerkleFrontier(scheme=scheme)
    assert isinstance(link, dict)
    try:
        tree = MerkleFrontier.from_json(ref.get("frontier"))
    except (ValueError, TypeError):
        return None
    if tree.scheme != scheme or tree.count != ref.get("count"):
        return None
    return tree if tree.root() == link.get("facts_root") else None


def _root(tree: MerkleFrontier, leaves: list[bytes]) -> str:
    """The root once ``leaves`` are appended to ``tree`` (``leaves`` emptied)."""
    tree.extend(leaves)
    leaves.clear()
    return tree.root()
