"""Signed decisions: a person's Ed25519 signature over their decision on a gate,
kept in the chained event that records it (docs/audit.md, "Signed decisions").

``converge approve/reject --sign-with KEY`` (or a CLI-signed decision uploaded to
the inbox's API) signs the statement :func:`decision_statement` builds: the gate,
its run, the run's chain head when deciding, who decides, approved, reason, the
value the proposal takes and the answer it was derived from. The signed statement
goes, as ``signature``, into the payload of the ``gate_decided`` event (or the
``gate_vote`` of a quorum vote that does not decide). :func:`check_signed_events`
checks each one against the recorded decision and the signer's registered public
key (:mod:`audit.signing._known_people`), so neither a database writer nor the operator can
forge who approved what without the person's private key.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from audit.core import StoreCore
from audit.signing._known_people import person, public_key_from_pem, public_keys
from audit.signing._statements import SigningKeyError, canonical, check_signature
from audit.tables import audit_events
from audit.trail import ChainRow

if TYPE_CHECKING:  # cryptography is imported where a key is used
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

__all__ = [
    "DECISION_TYPE",
    "SIGNATURE_FIELD",
    "SIGNED_KINDS",
    "chain_holds",
    "check_run_signatures",
    "check_signed_events",
    "decision_statement",
    "signed_deciders",
    "statement_problem",
    "verify_bundle_decisions",
]

DECISION_TYPE = "converge.decision/1"
"""The ``type`` of a signed decision statement."""

SIGNATURE_FIELD = "signature"
"""The payload field of a ``gate_decided`` / ``gate_vote`` event holding the statement."""

SIGNED_KINDS = ("gate_decided", "gate_vote")
"""The events that may carry a signed decision."""

_SAME = ("gate_id", "run_id", "approved", "reason", "value")
"""The statement's fields that must equal the recorded decision's."""


def decision_statement(
    *,
    gate_id: str,
    run_id: str,
    head: str,
    by: str,
    approved: bool,
    reason: str | None,
    value: Any,
    answer: Any,
) -> dict[str, Any]:
    """The statement a decider signs: ``value`` is what the proposal's content
    becomes (None: unchanged), ``answer`` the value the decider gave (a gate's
    ``validate_value`` hook derives ``value`` from it); ``head`` is the run's chain
    head when deciding (64 hex digits)."""
    return {
        "type": DECISION_TYPE,
        "gate_id": gate_id,
        "run_id": run_id,
        "head": head,
        "by": by,
        "approved": approved,
        "reason": reason,
        "value": value,
        "answer": answer,
    }


def chain_holds(store: StoreCore, run_id: str, head: str) -> bool:
    """Whether ``head`` is the hash of one of the run's events (a head signed at)."""
    with store.transaction(write=False) as conn:
        found = conn.execute(
            select(audit_events.c.seq)
            .where(audit_events.c.run_id == run_id, audit_events.c.hash == head)
            .limit(1)
        ).first()
    return found is not None


def _names(by: Any) -> set[str]:
    """The people a recorded ``by`` names (a quorum's is ``"alice, bob"``)."""
    return {n.strip() for n in str(by).split(",")} if by is not None else set()


def _same(a: Any, b: Any) -> bool:
    try:
        return canonical(a) == canonical(b)
    except (TypeError, ValueError):
        return False


def statement_problem(
    statement: Any,
    payload: Mapping[str, Any],
    run_id: str,
    earlier: set[str],
    keys: Mapping[str, Ed25519PublicKey | None],
) -> str | None:
    """Why the signed ``statement`` of an event with ``payload`` does not prove its
    decision (None: it does). ``earlier``: the hashes of the run's events before
    this one; ``keys``: the registered public keys by person (None: none)."""
    gate = payload.get("gate_id")
    if not isinstance(statement, dict) or statement.get("type") != DECISION_TYPE:
        return f"gate {gate}: its signed decision is not a {DECISION_TYPE} statement"
    who = statement.get("by")
    recorded = {**payload, "run_id": run_id}
    differs = [f for f in _SAME if not _same(statement.get(f), recorded.get(f))]
    if differs:
        return (
            f"gate {gate}: the recorded decision differs from what {who} signed "
            f"({', '.join(differs)})"
        )
    if not isinstance(who, str) or who not in _names(payload.get("by")):
        recorded_by = payload.get("by")
        return f"gate {gate}: signed by {who}, who is not its recorded decider ({recorded_by})"
    if statement.get("head") not in earlier:
        return f"gate {gate}: signed at a chain head that is not earlier in run {run_id}"
    if who not in keys or keys[who] is None:
        return f"gate {gate}: signed by {who}, who has no registered public key"
    public = keys[who]
    assert public is not None
    why = check_signature(public, statement)
    if why is not None:
        return f"gate {gate}: the decision signed by {who} fails with {who}'s key: {why}"
    return None


def check_signed_events(
    run_id: str,
    events: Iterable[tuple[int, str, Mapping[str, Any], str]],
    keys: Mapping[str, Ed25519PublicKey | None],
) -> tuple[list[tuple[int, str]], int]:
    """Check every signed decision among ``events`` (``(seq, kind, payload, hash)`` in
    seq order): the problems ``(seq, why)`` naming each failing gate, and how many
    signed decisions there were."""
    earlier: set[str] = set()
    problems: list[tuple[int, str]] = []
    signed = 0
    for seq, kind, payload, digest in events:
        if kind in SIGNED_KINDS and SIGNATURE_FIELD in payload:
            signed += 1
            why = statement_problem(payload[SIGNATURE_FIELD], payload, run_id, earlier, keys)
            if why is not None:
                problems.append((seq, why))
        earlier.add(digest)
    return problems, signed


def check_run_signatures(
    store: StoreCore, run_id: str, rows: Sequence[ChainRow]
) -> tuple[int, str] | None:
    """The first signed decision of the run that does not verify ``(seq, why)``, or
    None (``verify`` calls it once the chain verifies). Reads the registered keys
    only when the run holds a signed decision."""
    marker = f'"{SIGNATURE_FIELD}":'
    if not any(r.kind in SIGNED_KINDS and marker in r.payload for r in rows):
        return None
    keys = public_keys(store)

    def parsed() -> Iterable[tuple[int, str, Mapping[str, Any], str]]:
        for r in rows:
            if r.kind in SIGNED_KINDS and marker in r.payload:
                try:
                    payload = json.loads(r.payload)
                except ValueError:
                    payload = {}
                yield r.seq, r.kind, payload if isinstance(payload, dict) else {}, r.hash
            else:
                yield r.seq, r.kind, {}, r.hash

    problems, _signed = check_signed_events(run_id, parsed(), keys)
    return problems[0] if problems else None


def signed_deciders(
    store: StoreCore, payloads: Iterable[Mapping[str, Any]]
) -> dict[str, str | None]:
    """The registered public keys (PEM, None: none) of everyone who signed one of
    ``payloads``: what a proof bundle carries to check them offline."""
    names = {
        str(p[SIGNATURE_FIELD].get("by"))
        for p in payloads
        if isinstance(p.get(SIGNATURE_FIELD), dict)
    }
    if not names:
        return {}
    out: dict[str, str | None] = {}
    for name in sorted(names):
        found = person(store, name)
        out[name] = None if found is None else found.public_key
    return out


def verify_bundle_decisions(bundle: Mapping[str, Any], run_id: str) -> str | tuple[bool, str]:
    """A proof bundle's check of its signed decisions (docs/audit-format.md): each
    ``gate_decided`` / ``gate_vote`` event's signed statement against the recorded
    decision and the public key (PEM) the bundle carries for its signer in
    ``deciders``. Only the payloads of those events are parsed."""
    keys: dict[str, Ed25519PublicKey | None] = {}
    for name, pem in dict(bundle["deciders"]).items():
        try:
            keys[name] = None if not isinstance(pem, str) else public_key_from_pem(pem)
        except SigningKeyError:
            keys[name] = None

    def events() -> Iterable[tuple[int, str, Mapping[str, Any], str]]:
        for seq, e in enumerate(bundle["events"], 1):
            parts = json.loads(e["message"]) if "message" in e else e  # a /1 bundle
            kind, payload = parts["kind"], parts["payload"]
            if kind in SIGNED_KINDS:
                payload = json.loads(payload) if isinstance(payload, str) else payload
            yield seq, kind, payload if isinstance(payload, dict) else {}, str(e["hash"])

    problems, signed = check_signed_events(run_id, events(), keys)
    if problems:
        return False, "; ".join(why for _seq, why in problems)
    return f"{signed} signed decision(s) verify with their deciders' public keys"
