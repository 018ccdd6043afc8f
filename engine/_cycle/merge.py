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
from collections.abc import Callable
from math import isfinite
from typing import Any

from engine._cycle.collector import FREEZE_AFTER_FACTS
from engine._cycle.cycling import Cycling, End
from engine._cycle.judge import JUDGE, Judge, pause
from engine._cycle.run import PendingGate, Run
from engine.errors import ResumeError
from engine.facts import MAX_INT, Fact, Proposal, Provenance, canonical_json, content_key
from engine.hashing.commitment import commitment, new_salts, salted_commitment, salted_text
from engine.hashing.merkle import LEAF_SEEDED, SALTED
from engine.hitl import HitlPolicy
from engine.settings import EngineSettings
from engine.stop import Error, ErrorCategory, HitlGatePending, PromotionRejected, StopReason
from engine.store import AuditEvent, GateRecord, PromotedFacts

_quote = json.encoder.encode_basestring

FOLD_LEAVES = 4096
"""Merkle leaves kept before they are folded into the run's frontier."""

SALT_BATCH = 1024
"""(chain format 2) Salts drawn from the OS in one read: 32 KiB at most."""


class Merge:
    """The step that applies a gate's decision if the run waited on one, then
    promotes the cycle's proposals in registration order; a stop or a gate that
    matches ends the merge (the gate pauses the run)."""

    __slots__ = ()

    def run(self, leg: Cycling) -> Judge | End:
        """The :class:`Judge` of the merged cycle, or the pause."""
        settings, run = leg.settings, leg.run
        if run.gating.pending_gate is not None:
            apply_decision(settings, run)
        paused = False
        effects = run.cursor.merge_effects
        if effects and gc.isenabled():
            # the facts a merge builds all survive it: a full collection in its middle
            # walks the growing context to free nothing (a resume paused 60-230 ms
            # three times in a merge of 100k facts), so none runs during a large one
            total = 0
            for _name, proposals in effects:
                total += len(proposals)
            if total >= FREEZE_AFTER_FACTS:
                gc.disable()
                paused = True
        try:
            return promote(settings, run)
        finally:
            if paused:
                leg.freezer.merged()
                gc.enable()


def apply_decision(settings: EngineSettings, run: Run) -> None:
    """The decision of the gate the run waited on (Engine.resume): approve → the
    proposal is promoted where it stood; reject → it is skipped, remembered (it
    never reopens a gate) and a ``hitl.rejected`` diagnostic fact is proposed (as
    converge-core's ``hitl-rejected``)."""
    pg = run.gating.pending_gate
    assert pg is not None
    decision = pg.decision
    if decision is None:
        raise ResumeError(f"run {run.run_id} waits on gate {pg.record.gate_id}")
    rec = pg.record
    run.gating.apply_decision()
    if settings.store is not None or run.listener is not None:
        # the store chained gate_decided when it recorded the decision
        run.record(
            AuditEvent("run_resumed", run.cursor.cycle, {"gate_id": rec.gate_id}, time.time())
        )
    if decision.approved:
        run.cursor.merge_from((pg.effect_index, pg.proposal_index))
        return
    key = rec.proposal["key"]
    content = rec.proposal["content"]
    run.gating.remember_rejected(key, content)
    run.cursor.merge_from((pg.effect_index, pg.proposal_index + 1))
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
    run.cursor.add_to_merge("hitl", [diag])


def promote(settings: EngineSettings, run: Run) -> Judge | End:
    """Promote the merge's effects from where it stands, in registration order: its
    :class:`Judge`, or the stop or pause that ended it."""
    cycle = run.cursor.cycle
    effects = run.cursor.merge_effects
    start_i, start_j = run.cursor.merge_pos
    recorder = (
        FactRecorder(run, cycle)
        if (settings.store is not None or run.listener is not None)
        else None
    )
    for ei in range(start_i, len(effects)):
        stopped = promote_effect(
            settings, run, recorder, ei, effects[ei][0], start_j if ei == start_i else 0
        )
        if stopped is not None:
            return _stopped(settings, run, stopped)
    if recorder is not None:
        recorder.close()
    run.cursor.merge_done()
    return JUDGE


Appenders = tuple[
    Callable[[Fact], None], Callable[[str], None], Callable[[str], None], Callable[[str], None]
]
"""The appends of a batch's facts, their texts (canonical JSON), their rows and (chain
format 2) their commitments."""


class FactRecorder:
    """The store side of a merge: the ``PromotedFacts`` batch its facts go to (a new
    one after an event a gate records; its ``appenders``), and the ``constants`` of
    their texts and Merkle leaves: keys quoted once, the cycle, the leaves' append
    and prefix."""

    __slots__ = ("appenders", "batch", "constants", "cycle", "run")

    def __init__(self, run: Run, cycle: int) -> None:
        integrity = run.integrity
        facts = run.facts.facts
        self.run = run
        self.cycle = cycle
        quoted: dict[str, tuple[str, str]] = {}  # keys as JSON, quoted once per merge
        # a sha256 seeded with RFC 6962's 0x00 (nothing for a LEGACY run)
        leaf_seeded = LEAF_SEEDED[integrity.scheme]
        self.constants = (quoted, str(cycle), integrity.leaf_adder(), leaf_seeded)
        if not integrity.covers(len(facts)):
            integrity.root(facts)  # the leaves of input or checkpointed facts
        self.open()

    def open(self) -> Appenders:
        """A new batch, after the events recorded so far: its appenders."""
        batch = self.batch = PromotedFacts(self.cycle, time.time())
        self.run.record(batch)
        self.appenders = (
            batch.facts.append,
            batch.texts.append,
            batch.rows.append,
            batch.commits.append,
        )
        return self.appenders

    def close(self) -> None:
        """The merge is done: an empty last batch goes, and the leaves fold into the
        Merkle frontier as the run goes (a checkpoint or the stop then costs
        O(log n), not a pass over every fact since)."""
        if not self.batch.facts:
            self.run.withdraw(self.batch)
        if self.run.integrity.waiting >= FOLD_LEAVES:
            self.run.integrity.fold_leaves()


def promote_effect(
    settings: EngineSettings, run: Run, rec: FactRecorder | None, ei: int, name: str, j0: int
) -> StopReason | None:
    """Promote effect ``ei`` (of suggestor ``name``) from its proposal ``j0``: None, or
    the stop (or the gate's pause) that ended the merge at one of them."""
    proposals = run.cursor.merge_effects[ei][1]
    cycle = run.cursor.cycle
    gated = bool(settings.promotion_gates or settings.hitl_policies)
    rejected, facts, new_append = run.gating.rejected, run.facts, run.cursor.promotions().append
    has, by_key, facts_append = facts.identities, facts.by_key, facts.facts.append
    add_identity = has.add
    tuple_new = tuple.__new__
    prefix = f"{name}/{cycle}/{ei}."
    if rec is not None:
        # the constant parts of this effect's facts' canonical JSON (fact_json)
        qname, qprefix = _quote(name), _quote(prefix)[:-1]
        quoted, cyc, leaf_add, leaf_seeded = rec.constants
        batch_fact, batch_text, batch_row, batch_commit = rec.appenders
        seals = run.integrity.seals if run.integrity.scheme == SALTED else None
        # a crash recovery promotes again what the dead process recorded: same salts
        again = run.recovery.replayed if seals is not None and run.recovery.replaying else None
        # fresh salts drawn SALT_BATCH at a time (one system call), used 32 bytes each
        salt_raw, salt_hex, salt_at = b"", "", 0
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
            elif (c is int and -MAX_INT < content < MAX_INT) or (c is float and isfinite(content)):
                identity = (key, content)
            else:
                identity = (key, content_key(content))
            if parents or type(parents) is not tuple:
                parents = _checked_parents(parents)
            if given_id is not None and (type(given_id) is not str or not given_id):
                raise TypeError(f"id must be a non-empty string, got {given_id!r}")
        except (TypeError, ValueError) as exc:
            return _invalid(run, f"{name}: invalid proposal {pj}: {exc}")
        if identity in has or (rejected and identity in rejected):
            continue
        pid = given_id or prefix + str(pj)
        if gated:
            verdict = _gate(settings, run, rec, p, pid, name, ei, pj)
            if verdict is not None:
                if not isinstance(verdict, str):
                    return verdict
                if rec is not None:  # a new batch after the gate's event, if it recorded one
                    batch_fact, batch_text, batch_row, batch_commit = rec.appenders
                continue
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
        if rec is not None:
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
            confs = "1.0" if confidence == 1.0 else repr(confidence)
            if type(confidence) is not float:
                confs = canonical_json(confidence)
            ps = "[" + ",".join([_quote(x) for x in parents]) + "]" if parents else "[]"
            qpid = _quote(given_id) if given_id else f'{qprefix}{pj}"'
            qid = f'{qopen}{n}"'
            text = (
                f'{{"confidence":{confs},"content":{cs},"id":{qid},"key":{qkey},'
                f'"provenance":{{"cycle":{cyc},"parents":{ps},"proposal_id":{qpid},'
                f'"suggestor":{qname}}}}}'
            )
            leaf = leaf_seeded()
            if seals is None:
                row = f"[{qid},{qkey},{cs},{confs},{qname},{cyc},{qpid},{ps}]"
                leaf.update(text.encode())
            else:  # chain format 2: the leaf is its salted commitment, the salt kept beside
                was = again.get(fact[0]) if again else None
                if was and "salt" in was:
                    seal = was["salt"]
                    commit = commitment(seal, text)
                else:
                    if salt_at == len(salt_raw):
                        salt_raw, salt_hex = new_salts(min(SALT_BATCH, len(proposals) - pj))
                        salt_at = 0
                    seal = salt_hex[2 * salt_at : 2 * salt_at + 64]
                    commit = salted_commitment(salt_raw[salt_at : salt_at + 32], text)
                    salt_at += 32
                seals[fact[0]] = seal
                leaf.update(commit.encode())
                batch_commit(commit)
                text = salted_text(text, seal)
                row = f'[{qid},{qkey},{cs},{confs},{qname},{cyc},{qpid},{ps},"{seal}"]'
            leaf_add(leaf.digest())
            batch_fact(fact)
            batch_text(text)
            # its checkpoint row (engine.facts.fact_row), for the store's fact chunks
            batch_row(row)
    return None


def _invalid(run: Run, message: str) -> StopReason:
    """The merge stops at an invalid proposal."""
    run.cursor.abandon_merge()
    return Error(message=message, error_category=ErrorCategory.SUGGESTOR)


def _gate(
    settings: EngineSettings,
    run: Run,
    rec: FactRecorder | None,
    p: Proposal,
    pid: str,
    name: str,
    ei: int,
    pj: int,
) -> StopReason | str | None:
    """The promotion gates' verdict on ``p`` (``"drop"``, a rejection that stops the
    merge), then the HITL policies' (a gate that opens): None when it goes through.
    A drop the store records closes ``rec``'s batch: the next facts go to a new one."""
    if settings.promotion_gates:
        before = len(run.events)
        verdict = check_promotion_gates(settings, run, p, pid, name)
        if verdict is not None:
            if not isinstance(verdict, str):
                run.cursor.abandon_merge()
            elif rec is not None and len(run.events) != before:
                rec.open()  # after the event
            return verdict
    if settings.hitl_policies and not run.gating.pass_approved((ei, pj)):
        return open_gate_if_matched(settings, run, p, pid, name, ei, pj)
    return None


MERGE = Merge()


def _stopped(settings: EngineSettings, run: Run, reason: StopReason) -> Judge | End:
    """The merge stopped with ``reason``: a gate pauses the run, anything else is a
    signal for the judgement."""
    if isinstance(reason, HitlGatePending):
        return End(pause(settings, run, reason))
    run.cursor.signal(reason)
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
        if settings.store is not None or run.listener is not None:
            run.record(
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
            run.spend.count_drop()
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
            run.cursor.abandon_merge()
            return Error(
                message=f"hitl policy {policy.name} raised {type(exc).__name__}: {exc}",
                error_category=ErrorCategory.CONFIGURATION,
            )
        if summary is None:
            continue
        gate_id = run.gating.open_gate(run.run_id)
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
        run.gating.wait_on(PendingGate(record, ei, pj))
        run.cursor.merge_from((ei, pj))
        return HitlGatePending(
            gate_id=gate_id, proposal_id=pid, summary=summary, agent_id=name, cycle=run.cursor.cycle
        )
    return None


def _rules_of(policy: HitlPolicy) -> dict[str, Any]:
    """The application's rules for deciding the policy's gates (``decision_rules``,
    e.g. who may approve), recorded with the gate and chained in ``gate_opened``."""
    rules = getattr(policy, "decision_rules", None)
    return {"rules": dict(rules)} if isinstance(rules, dict) and rules else {}
