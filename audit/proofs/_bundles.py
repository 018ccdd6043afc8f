"""Proof bundles: one run's evidence, or one fact's, in a self-contained JSON file
(docs/audit-format.md has the layout, byte for byte).

:func:`export_run` gathers a stopped or paused run's events (the parts of their
exact chained messages: a fact is carried once, as its ``fact_promoted`` payload),
its initial facts' texts, its checkpoint, a run statement signed now (the events'
and facts' RFC 6962 roots, the chain head), the facts root signed when the run
stopped, the run's ledger entry with its inclusion proof, and the ledger's signed
head with the checkpoint note (C2SP tlog-checkpoint) of the same size and root.
:func:`export_fact` keeps of the facts only one, with its audit path to the facts
root: the other facts are present as hashes only. :mod:`audit.proofs._bundle_check`
verifies either with the public key alone.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import select

from audit.core import StoreCore
from audit.ledger import checkpoint_note, ledger_entries, ledger_tree, parse_checkpoint, signed_head
from audit.queries import inherited_facts
from audit.signing import (
    SIGNED_KINDS,
    Signer,
    ensure_signature_tables,
    signed_by,
    signed_deciders,
    stored_statement,
    verifier_key,
)
from audit.tables import runs
from audit.trail import TERMINAL, read_chain, read_checkpoint, verify_chain
from engine.errors import CheckpointError, ExportError, ForkError, ResumeError, RunNotFound
from engine.facts import canonical_json
from engine.hashing.commitment import chain_parts, text_commitment
from engine.hashing.merkle import SALTED, commitment_leaf, merkle_scheme, text_leaves
from engine.hashing.proofs import MerkleTree

FORMAT = "converge.bundle/2"
"""The ``format`` of the proof bundles written now."""

FORMAT_V3 = "converge.bundle/3"
"""The bundles of runs of chain format 2 (``sha256/2``): the layout of ``/2``, each
fact's leaf and chained payload its salted commitment (docs/audit-format.md)."""

FORMAT_V1 = "converge.bundle/1"
"""The first layout (each event's whole message, the facts listed again): still read."""

RUN_TYPE = "converge.run/1"
"""The ``type`` of the run statement signed at export."""

_quote = json.encoder.encode_basestring


def _initial_texts(store: StoreCore, run_id: str, started: dict[str, Any]) -> list[str]:
    """The texts of the facts a run starts with: its initial facts, or a fork's
    facts taken from its parent up to the fork point (its ``run_started`` refers to
    them, the bundle carries them: it verifies without the parent). Raises
    ``ExportError`` when a fork's parent is gone or no longer holds them."""
    if not started.get("initial_facts") and "forked_from" in started:
        try:
            return inherited_facts(store, run_id, started)[1]
        except (ResumeError, ForkError) as exc:  # ParentMissing, UnverifiedParent...
            raise ExportError(f"run {run_id}: nothing exported: {exc}") from None
    return [canonical_json(f) for f in started.get("initial_facts", ())]


def fact_leaves(texts: list[str], scheme: str) -> list[bytes]:
    """The facts tree's leaves of fact texts (payloads as stored): of their salted
    commitments under :data:`SALTED`, else of the texts themselves."""
    if scheme == SALTED:
        return [commitment_leaf(text_commitment(t)) for t in texts]
    return text_leaves(texts, scheme)


class _Run:
    """What an export reads of one run: its row, its events, its facts' leaves."""

    def __init__(self, store: StoreCore, run_id: str) -> None:
        with store.transaction(write=False) as conn:
            row = conn.execute(select(runs).where(runs.c.run_id == run_id)).one_or_none()
            if row is None:
                raise RunNotFound(f"no run {run_id!r} in audit store {store.shown}")
            rows = read_chain(conn, run_id)
            self.checkpoint = read_checkpoint(conn, run_id)
        self.row = row
        self.rows = rows
        self.messages: list[str] = []
        report = verify_chain(
            run_id,
            rows,
            head_hash=row.head_hash,
            last_seq=row.last_seq,
            chain=row.chain,
            key=store.key,
            messages=self.messages,
        )
        if not report.ok:
            raise ExportError(f"run {run_id} does not verify, nothing exported: {report}")
        terminal = [r for r in rows if r.kind in TERMINAL]
        if not terminal:
            raise ExportError(f"run {run_id} has not stopped or paused yet: nothing to prove")
        self.stop = json.loads(terminal[-1].payload)
        self.initial: list[str] = []
        self.scheme = merkle_scheme(None)
        started = next((r for r in rows if r.kind == "run_started"), None)
        if started is not None:
            payload = json.loads(started.payload)
            self.scheme = merkle_scheme(payload.get("facts_merkle"))
            self.initial = _initial_texts(store, run_id, payload)
        # a fact's leaf hashes its fact_promoted payload, the exact chained text
        self.facts = self.initial + [r.payload for r in rows if r.kind == "fact_promoted"]
        self.facts_tree = MerkleTree(fact_leaves(self.facts, self.scheme), self.scheme)
        if self.facts_tree.root().hex() != self.stop.get("facts_root"):
            raise ExportError(
                f"run {run_id}: the facts root of its last stop is not the root of its facts"
            )

    def statement(self) -> dict[str, Any]:
        """The run statement the export signs."""
        events_tree = MerkleTree(text_leaves(self.messages))
        return {
            "type": RUN_TYPE,
            "run_id": self.row.run_id,
            "chain": self.row.chain,
            "last_seq": self.row.last_seq,
            "head": self.row.head_hash,
            "events_count": len(self.rows),
            "events_root": events_tree.root().hex(),
            "facts_count": len(self.facts),
            "facts_root": self.facts_tree.root().hex(),
            "facts_merkle": self.scheme,
            "ts": int(time.time()),
        }


def _checkpoint(
    store: StoreCore, signer: Signer, tree: MerkleTree, given: str | None
) -> tuple[int, str]:
    """(size, note text) of the checkpoint a bundle proves against: ``given`` (one
    of this store's ledger signed by ``signer``, cosigned or not), else a new one."""
    if given is None:
        return tree.size, checkpoint_note(store, signer, tree=tree).render()
    try:
        checkpoint, note = parse_checkpoint(given)
    except CheckpointError as exc:
        raise ExportError(f"the checkpoint given: {exc}") from exc
    why = signed_by(note, verifier_key(signer.public))
    if why is not None:
        raise ExportError(f"the checkpoint given is not signed by the signing key: {why}")
    if checkpoint.size > tree.size:
        raise ExportError(f"the checkpoint given (size {checkpoint.size}) is not of this store")
    mine = checkpoint_note(store, signer, checkpoint.origin, checkpoint.size, tree)
    if mine.text != note.text:
        raise ExportError(
            f"the checkpoint given (size {checkpoint.size}) is not of this store's ledger"
        )
    return checkpoint.size, given


def _ledger_part(
    store: StoreCore, signer: Signer, run_id: str, checkpoint: str | None
) -> dict[str, Any]:
    """The run's latest ledger entry, its inclusion proof, the signed head and the
    checkpoint note of the same size and root."""
    entries = ledger_entries(store)
    tree = ledger_tree(entries)
    size, note = _checkpoint(store, signer, tree, checkpoint)
    mine = [e for e in entries if e.run_id == run_id]
    if not mine:
        raise ExportError(f"run {run_id} is not in the ledger (recorded before it existed)")
    entry = mine[-1]
    if entry.seq > size:
        raise ExportError(
            f"the run's ledger entry {entry.seq} is not in the checkpoint of size {size}: "
            "take a newer one"
        )
    head = signed_head(store, signer, tree, size)
    return {
        "ledger": {
            "entry": entry.to_json(),
            "index": entry.seq - 1,
            "proof": [p.hex() for p in tree.inclusion_proof(entry.seq - 1, size)],
        },
        "signed_head": head,
        "ledger_checkpoint": note,
    }


def _common(
    store: StoreCore, signer: Signer, run: _Run, checkpoint: str | None = None
) -> dict[str, Any]:
    statement = run.statement()
    if (run.row.last_seq, run.row.head_hash) != (statement["last_seq"], statement["head"]):
        raise ExportError(f"run {run.row.run_id} changed while it was exported")
    ensure_signature_tables(store)
    with store.transaction(write=False) as conn:
        at_stop = stored_statement(conn, "facts_root", run.row.run_id, signer.key_id)
    if at_stop is not None and at_stop.get("facts_root") != statement["facts_root"]:
        at_stop = None  # signed at an earlier stop of a run resumed since
    return {
        "format": FORMAT_V3 if chain_parts(run.row.chain)[1] else FORMAT,
        "run": signer.sign(statement),
        "facts_root_signature": at_stop,
        **_ledger_part(store, signer, run.row.run_id, checkpoint),
    }


def export_run(
    store: StoreCore, signer: Signer, run_id: str, checkpoint: str | None = None
) -> dict[str, Any]:
    """The proof bundle of a stopped or paused run (a JSON-ready dict), its ledger
    part against ``checkpoint`` (a checkpoint note's text, e.g. one a witness
    cosigned) or, by default, against a checkpoint of the ledger as it is now.

    Raises ``RunNotFound``, ``ExportError`` (not stopped yet, a chain that does not
    verify with the store's key, a run the ledger does not hold, a checkpoint not
    of this store or older than the run's entry), ``StoreError``.
    """
    run = _Run(store, run_id)
    bundle = {"kind": "run", **_common(store, signer, run, checkpoint)}
    # each event's parts, its chained message rebuilt by the verifier (the facts are
    # the fact_promoted payloads: carried once); the timestamp's text is the one its
    # message ends with (`,"ts":T}`), not a second repr of the float
    bundle["events"] = [
        {
            "cycle": r.cycle,
            "kind": r.kind,
            "payload": r.payload,
            "ts": m[m.rindex(',"ts":') + 6 : -1],
            "hash": r.hash,
        }
        for r, m in zip(run.rows, run.messages, strict=True)
    ]
    bundle["initial_facts"] = run.initial
    bundle["checkpoint"] = run.checkpoint
    signed = (json.loads(r.payload) for r in run.rows if r.kind in SIGNED_KINDS)
    deciders = signed_deciders(store, signed)
    if deciders:  # the public keys that check the signed decisions among the events
        bundle["deciders"] = deciders
    return bundle


def export_fact(
    store: StoreCore, signer: Signer, run_id: str, fact_id: str, checkpoint: str | None = None
) -> dict[str, Any]:
    """The bundle proving one fact of the run: that fact, its audit path in the run's
    facts tree, the signed run statement and the ledger part; no other fact's content.

    Raises what :func:`export_run` raises, and ``ExportError`` for an unknown fact id.
    """
    run = _Run(store, run_id)
    quoted = _quote(fact_id)
    index = next(
        (
            i
            for i, text in enumerate(run.facts)
            if quoted in text and json.loads(text).get("id") == fact_id
        ),
        None,
    )
    if index is None:
        raise ExportError(f"run {run_id} has no fact {fact_id!r}")
    bundle = {"kind": "fact", **_common(store, signer, run, checkpoint)}
    bundle["fact"] = {
        "text": run.facts[index],
        "index": index,
        "proof": [p.hex() for p in run.facts_tree.inclusion_proof(index)],
    }
    return bundle


def write_bundle(bundle: dict[str, Any], path: Path) -> None:
    """Write ``bundle`` to ``path`` as compact UTF-8 JSON (non-ASCII as itself).

    orjson, as a 100k-fact bundle is about 40 MB of JSON; ``json`` only for what
    orjson refuses (integers past 64 bits). Raises ``OSError``.
    """
    try:
        data = orjson.dumps(bundle)
    except TypeError:  # orjson.JSONEncodeError
        data = json.dumps(bundle, ensure_ascii=False, separators=(",", ":")).encode()
    path.write_bytes(data)
