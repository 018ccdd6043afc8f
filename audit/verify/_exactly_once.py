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
  (``engine.hashing.merkle``: RFC 6962, or LEGACY for runs recorded before).

The first violation is reported as ``(seq, why)`` (the event that shows it).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from audit.trail._chain import ChainRow
from audit.trail._kinds import TERMINAL
from audit.verify._crosscheck import Problem
from engine.facts import canonical_json
from engine.hashing.merkle import LEAF_PREFIX, LEGACY, merkle_scheme, root_of_leaves

__all__ = ["check_exactly_once"]


def check_exactly_once(rows: Sequence[ChainRow]) -> Problem:
    """The first exactly-once violation in a run's chained ``rows`` (None: none)."""
    sha = hashlib.sha256
    seen: dict[str, int] = {}
    leaves: list[bytes] = []
    leg_open = False
    previous = ""
    scheme = LEGACY
    leaf_prefix = LEAF_PREFIX[scheme]
    for row in rows:
        kind = row.kind
        if kind == "fact_promoted":
            fact_id = json.loads(row.payload).get("id")
            if fact_id in seen:
                return row.seq, (
                    f"fact {fact_id} promoted twice (events {seen[fact_id]} and {row.seq})"
                )
            seen[fact_id] = row.seq
            leaves.append(sha(leaf_prefix + row.payload.encode()).digest())
        elif kind == "run_started":
            started = json.loads(row.payload)
            try:  # the run's facts root scheme (engine.hashing.merkle), for its whole life
                scheme = merkle_scheme(started.get("facts_merkle"))
            except ValueError as exc:
                return row.seq, str(exc)
            leaf_prefix = LEAF_PREFIX[scheme]
            for fact in started.get("initial_facts", ()):
                if isinstance(fact, dict):
                    seen.setdefault(str(fact.get("id")), row.seq)
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
            if recorded is not None and recorded != root_of_leaves(leaves, scheme):
                return row.seq, "facts root differs from the facts promoted before this stop"
        previous = kind
    return None
