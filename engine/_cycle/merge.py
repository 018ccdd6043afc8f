"""Merge and promotion: a cycle's proposals become facts (docs/concepts.md (step 5)).

Effects merge in registration order. A proposal equal in (key, content) to a fact,
or to one a human rejected in this run, is dropped first (so no gate opens twice
for the same thing); the others pass the promotion gates (a rejection stops the
run with ``PromotionRejected``, or drops the proposal with ``on_reject="drop"``),
then the HITL policies (a match pauses the run, §6), then become facts with their
provenance. A pause keeps its place in the merge (``run.cursor.merge_pos``) so that a
resume goes on from the proposal the gate decided. The step is :class:`Merge`.
"""

from __future__ import annotations

import gc
import json
import time
from hashlib import sha256
from math import isfinite
from typing import Any

from engine._cycle.collector import FREEZE_AFTER_FACTS
from engine._cycle.cycling import Cycling, End
from engine._cycle.judgement import JUDGE, Judge, pause
from engine._cycle.run import PendingGate, Run
from engine.errors import ResumeError
from engine.facts import MAX_INT, Fact, Proposal, Provenance, canonical_json, content_key
from engine.hashing.merkle import LEAF_PREFIX
from engine.hitl import HitlPolicy
from engine.settings import EngineSettings
from engine.stop import Error, ErrorCategory, HitlGatePending, PromotionRejected, StopReason
from engine.store import AuditEvent, GateRecord, PromotedFacts

_quote = json.encoder.encode_basestring

FOLD_LEAVES = 4096
"""Merkle leaves kept before they are folded into the run's frontier."""


class Merge:
    """The step that applies a gate's decision if the run waited on one, then
    promotes the cycle's proposals in registration order; a stop or a gate that
    matches ends the merge (the gate pauses the run)."""

    __slots__ = ()

    def run(self, leg: Cycling) -> Judge | End:
        """The :class:`Judge` of the merged cycle, or the pause."""
        settings, run = leg.settings, leg.run
        pg = run.gating.pending_gate
        if pg is not None:
            # the decision of the gate the run waited on (Engine.resume): approve → the
            # proposal is promoted where it stood; reject → it is skipped, remembered
            # (it never reopens a gate) and a ``hitl.rejected`` diagnostic fact is
            # proposed (as converge-core's ``hitl-rejected``)
            decision = pg.decision
            if decision is None:
                raise ResumeError(f"run {run.run_id} waits on gate {pg.record.gate_id}")
            rec = pg.record
            run.gating.pending_gate = None
            if settings.store is not None:
                # the store chained gate_decided when it recorded the decision
                run.events.append(
                    AuditEvent(
                        "run_resumed", run.cursor.cycle, {"gate_id": rec.gate_id}, time.time()
                    )
                )
            if decision.approved:
                run.gating.approved_once = (pg.effect_index, pg.proposal_index)
                run.cursor.merge_pos = (pg.effect_index, pg.proposal_index)
            else:
                key = rec.proposal["key"]
                content = rec.proposal["content"]
                run.gating.remember_rejected(key, content)
                run.cursor.merge_pos = (pg.effect_index, pg.proposal_index + 1)
                diag = Proposal(
                    "hitl.rejected",
                    {
                        "gate_id": rec.gate_id,
                        "proposal_id": rec.proposal_id,
                        "key": key,
                        "content": content,
                        "by": decision.by,
                        "reason": decision.reason,
                    },
                    # lineage reaches what it came from
                    parents=tuple(rec.proposal.get("parents", ())),
                )
                run.cursor.merge_effects.append(("hitl", [diag]))
        cycle = run.cursor.cycle
        new = run.cursor.cycle_new
        gates = settings.promotion_gates
        hitl = settings.hitl_policies
        store = settings.store is not None
        events = run.events
        rejected = run.gating.rejected
        facts = run.facts
        has = facts.identities
        add_identity = has.add
        by_key = facts.by_key
        facts_append = facts.facts.append
        new_append = new.append
        tuple_new = tuple.__new__
        effects = run.cursor.merge_effects
        start_i, start_j = run.cursor.merge_pos
        if store:
            leaf_append = run.integrity.leaves.append
            # RFC 6962's 0x00 (b"" for a LEGACY run)
            leaf_prefix = LEAF_PREFIX[run.integrity.frontier.scheme]
            if run.integrity.frontier.count + len(run.integrity.leaves) != len(facts.facts):
                run.integrity.root(facts.facts)  # the leaves of input or checkpointed facts
            batch = PromotedFacts(cycle, time.time())
            events.append(batch)
            batch_fact, batch_text, batch_row = (
                batch.facts.append,
                batch.texts.append,
                batch.rows.append,
            )
            quoted: dict[str, tuple[str, str]] = {}  # keys as JSON, quoted once per merge
            cyc = str(cycle)
        paused = False
        if effects and gc.isenabled():
            # the facts a merge builds all survive it: a full collection in its middle
            # walks the growing context to free nothing (R1 paused 60-230 ms three
            # times in a merge of 100k facts), so none runs during a large one
            total = 0
            for _name, proposals in effects:
                total += len(proposals)
            if total >= FREEZE_AFTER_FACTS:
                gc.disable()
                paused = True
        try:
            for ei in range(start_i, len(effects)):
                name, proposals = effects[ei]
                j0 = start_j if ei == start_i else 0
                prefix = f"{name}/{cycle}/{ei}."
                if store:
                    # the constant parts of this effect's facts' canonical JSON (fact_json)
                    qname = _quote(name)
                    qprefix = _quote(prefix)[:-1]
                for pj in range(j0, len(proposals)):
                    p = proposals[pj]
                    try:
                        if type(p) is not Proposal:
                            raise TypeError(f"expected a Proposal, got {type(p).__name__}")
                        key, content, confidence, parents, given_id = p
                        if type(key) is not str or not key:
                            raise ValueError(f"key must be a non-empty string, got {key!r}")
                        if not 0.0 <= confidence <= 1.0:
                            raise ValueError(f"confidence must be within 0..1, got {confidence!r}")
                        c = type(content)
                        if c is str:
                            if not content.isascii():
                                content.encode("utf-8")  # lone surrogates are not UTF-8
                            identity = (key, content)
                        elif (c is int and -MAX_INT < content < MAX_INT) or (
                            c is float and isfinite(content)
                        ):
                            identity = (key, content)
                        else:
                            identity = (key, content_key(content))
                        if parents or type(parents) is not tuple:
                            parents = _checked_parents(parents)
                        if given_id is not None and (type(given_id) is not str or not given_id):
                            raise TypeError(f"id must be a non-empty string, got {given_id!r}")
                    except (TypeError, ValueError) as exc:
                        run.cursor.merge_effects = []
                        return _stopped(
                            settings,
                            run,
                            Error(
                                message=f"{name}: invalid proposal {pj}: {exc}",
                                error_category=ErrorCategory.SUGGESTOR,
                            ),
                        )
                    if identity in has or (rejected and identity in rejected):
                        continue
                    pid = given_id or prefix + str(pj)
                    if gates or hitl:
                        before = len(events)
                        if gates:
                            verdict = check_promotion_gates(settings, run, p, pid, name)
                            if verdict is not None:
                                if isinstance(verdict, str):
                                    if store and len(events) != before:
                                        batch = PromotedFacts(cycle, time.time())  # after the event
                                        events.append(batch)
                                        batch_fact, batch_text, batch_row = (
                                            batch.facts.append,
                                            batch.texts.append,
                                            batch.rows.append,
                                        )
                                    continue
                                run.cursor.merge_effects = []
                                return _stopped(settings, run, verdict)
                        if hitl:
                            if (
                                run.gating.approved_once is not None
                                and run.gating.approved_once
                                == (
                                    ei,
                                    pj,
                                )
                            ):
                                run.gating.approved_once = None
                            else:
                                opened = open_gate_if_matched(settings, run, p, pid, name, ei, pj)
                                if opened is not None:
                                    return _stopped(settings, run, opened)
                    # built with tuple.__new__: the named tuples' own __new__ costs 2x more
                    prov = tuple_new(Provenance, (name, cycle, pid, parents))
                    bucket = by_key.get(key)
                    n = "0" if bucket is None else str(len(bucket))
                    fact = tuple_new(Fact, (f"{key}#{n}", key, content, confidence, prov))
                    if bucket is None:
                        by_key[key] = [fact]
                    else:
                        bucket.append(fact)
                    facts_append(fact)
                    add_identity(identity)
                    new_append(fact)
                    if store:
                        # fact_json(fact) from parts quoted once: the event's payload and its leaf
                        q = quoted.get(key)
                        if q is None:
                            qkey = _quote(key)
                            q = quoted[key] = (qkey, qkey[:-1] + "#")  # and its ids' opening
                        qkey, qopen = q
                        if c is str:
                            cs = _quote(content)
                        elif c is int:
                            cs = str(content)
                        elif c is float:
                            cs = repr(content)
                        else:
                            cs = canonical_json(content)
                        if type(confidence) is float:
                            confs = "1.0" if confidence == 1.0 else repr(confidence)
                        else:
                            confs = canonical_json(confidence)
                        ps = "[" + ",".join([_quote(x) for x in parents]) + "]" if parents else "[]"
                        qpid = _quote(given_id) if given_id else f'{qprefix}{pj}"'
                        qid = f'{qopen}{n}"'
                        text = (
                            f'{{"confidence":{confs},"content":{cs},"id":{qid},"key":{qkey},'
                            f'"provenance":{{"cycle":{cyc},"parents":{ps},"proposal_id":{qpid},'
                            f'"suggestor":{qname}}}}}'
                        )
                        leaf_append(sha256(leaf_prefix + text.encode()).digest())
                        batch_fact(fact)
                        batch_text(text)
                        # its checkpoint row (engine.facts.fact_row), for the store's fact chunks
                        batch_row(f"[{qid},{qkey},{cs},{confs},{qname},{cyc},{qpid},{ps}]")
            if store:
                if not batch.facts and events and events[-1] is batch:
                    events.pop()
                if len(run.integrity.leaves) >= FOLD_LEAVES:
                    # fold the leaves into the Merkle frontier as the run goes: a checkpoint
                    # or the stop then costs O(log n), not a pass over every fact since
                    run.integrity.fold_leaves()
            run.cursor.merge_effects = []
            run.cursor.merge_pos = (0, 0)
            return JUDGE
        finally:
            if paused:
                gc.enable()


MERGE = Merge()


def _stopped(settings: EngineSettings, run: Run, reason: StopReason) -> Judge | End:
    """The merge stopped with ``reason``: a gate pauses the run, anything else is a
    signal for the judgement."""
    if isinstance(reason, HitlGatePending):
        return End(pause(settings, run, reason))
    run.cursor.pending_signals.append(reason)
    return JUDGE


def _checked_parents(parents: object) -> tuple[str, ...]:
    """``parents`` as a tuple of fact ids; raises ``TypeError`` when it is not one."""
    if type(parents) is tuple or type(parents) is list:
        for p in parents:
            if type(p) is not str:
                raise TypeError(f"parents must be fact ids (strings), got {p!r}")
        return tuple(parents)
    raise TypeError(f"parents must be a tuple of fact ids, got {type(parents).__name__}")


def check_promotion_gates(
    settings: EngineSettings, run: Run, p: Proposal, pid: str, name: str
) -> StopReason | str | None:
    """None when every promotion gate passes ``p``; ``"drop"`` when one drops it;
    ``PromotionRejected`` when one rejects it (recorded as ``proposal_rejected``)."""
    for gate in settings.promotion_gates:
        try:
            rejection = gate.check(p, name, run.context)
        except Exception as exc:
            rejection_reason = f"gate {gate.name} raised {type(exc).__name__}: {exc}"
        else:
            if rejection is None:
                continue
            rejection_reason = f"{gate.name}: {rejection.reason}"
        if settings.store is not None:
            run.events.append(
                AuditEvent(
                    "proposal_rejected",
                    run.cursor.cycle,
                    {
                        "proposal_id": pid,
                        "suggestor": name,
                        "key": p.key,
                        "gate": gate.name,
                        "reason": rejection_reason,
                        "on_reject": gate.on_reject,
                    },
                    time.time(),
                )
            )
        if gate.on_reject == "drop":
            run.spend.dropped += 1
            return "drop"
        return PromotionRejected(proposal_id=pid, reason=rejection_reason)
    return None


def open_gate_if_matched(
    settings: EngineSettings, run: Run, p: Proposal, pid: str, name: str, ei: int, pj: int
) -> StopReason | None:
    """Open a HITL gate on ``p`` when a policy matches it: ``HitlGatePending``
    (the merge keeps its place), an ``Error`` if a policy raised, else None."""
    for policy in settings.hitl_policies:
        try:
            summary = policy.match(p, name, run.context)
        except Exception as exc:
            run.cursor.merge_effects = []
            return Error(
                message=f"hitl policy {policy.name} raised {type(exc).__name__}: {exc}",
                error_category=ErrorCategory.CONFIGURATION,
            )
        if summary is None:
            continue
        run.gating.gates_opened += 1
        gate_id = f"{run.run_id}-g{run.gating.gates_opened}"
        now = time.time()
        timeout = policy.timeout_s
        record = GateRecord(
            gate_id=gate_id,
            run_id=run.run_id,
            proposal_id=pid,
            proposal={
                "key": p.key,
                "content": p.content,
                "confidence": p.confidence,
                "parents": list(p.parents),
                "id": p.id,
            },
            suggestor=name,
            summary=summary,
            cycle=run.cursor.cycle,
            policy=policy.name,
            opened_at=now,
            expires_at=(now + timeout) if timeout else None,
            on_timeout=policy.on_timeout,
            extra=_rules_of(policy),
        )
        run.gating.pending_gate = PendingGate(record, ei, pj)
        run.cursor.merge_pos = (ei, pj)
        return HitlGatePending(
            gate_id=gate_id, proposal_id=pid, summary=summary, agent_id=name, cycle=run.cursor.cycle
        )
    return None


def _rules_of(policy: HitlPolicy) -> dict[str, Any]:
    """The application's rules for deciding the policy's gates (``decision_rules``,
    e.g. who may approve), recorded with the gate and chained in ``gate_opened``."""
    rules = getattr(policy, "decision_rules", None)
    return {"rules": dict(rules)} if isinstance(rules, dict) and rules else {}
