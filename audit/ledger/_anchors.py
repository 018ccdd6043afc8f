"""Anchors kept outside the store, and what ``verify --anchor`` checks against them.

An anchor is what ``converge anchor`` prints: the ledger head ``seq:hash``, or,
with a signing key, the Ed25519-signed RFC 6962 head (one JSON line). Both also
say whether the store is keyed, where a database writer cannot remove it unseen:
a keyed store's anchor is ``seq:hash:keyed:FINGERPRINT`` and its signed head has
``"keyed": FINGERPRINT`` (the key's fingerprint, never the key). A writer without
the key who re-chains the store in plain sha256 and deletes its
``key_fingerprint`` row makes ``verify --all`` pass for an auditor without the
key; ``verify --anchor`` with an anchor taken before says it cannot vouch for it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from audit.core import StoreCore
from audit.ledger._ledger import LEDGER_ID, verify_ledger
from audit.ledger._tree import ledger_entries, ledger_tree, parse_head
from audit.trail import VerifyReport, keyed_as, stored_fingerprint
from engine.errors import ConvergeError
from engine.hashing.ledger import key_fingerprint, parse_anchor

__all__ = ["KEY_ID", "AnchorClaim", "anchor_text", "claim_reports", "parse_claim"]

KEY_ID = "(key)"
"""The ``run_id`` of the reports about the store's key (``verify --anchor``)."""

_FINGERPRINT = re.compile(r"^[0-9a-f]{32}$")


@dataclass(frozen=True, slots=True)
class AnchorClaim:
    """What an anchor says about the store: ``size`` ledger entries whose head is
    ``digest`` (a plain anchor: the ledger chain's hash of entry ``size``; a signed
    head: the RFC 6962 root of the first ``size`` entries), and ``keyed``: the
    fingerprint of the store's key (None: a plain store)."""

    size: int
    digest: str
    keyed: str | None
    signed: bool


def anchor_text(store: StoreCore, seq: int, digest: str) -> str:
    """The anchor line of ledger head (``seq``, ``digest``): ``seq:hash``, with
    ``:keyed:FINGERPRINT`` appended for a keyed store."""
    keyed = keyed_as(store)
    return f"{seq}:{digest}" if keyed is None else f"{seq}:{digest}:keyed:{keyed}"


def parse_claim(text: str) -> AnchorClaim:
    """An anchor (``seq:hash``, ``seq:hash:keyed:FP`` or a signed head's JSON line)
    → its claim. Raises ``ValueError`` naming what is wrong."""
    stripped = text.strip()
    if stripped.startswith("{"):
        head = parse_head(stripped)
        keyed = head.get("keyed")
        if keyed is not None and not (isinstance(keyed, str) and _FINGERPRINT.match(keyed)):
            raise ValueError(f"a signed head's 'keyed' must be a key fingerprint, got {keyed!r}")
        return AnchorClaim(head["size"], head["root"], keyed, True)
    parts = stripped.split(":")
    if len(parts) == 4 and parts[2] == "keyed":
        if not _FINGERPRINT.match(parts[3]):
            raise ValueError(f"{text!r} is not a ledger anchor (its key fingerprint is not hex)")
        seq, digest = parse_anchor(f"{parts[0]}:{parts[1]}")
        return AnchorClaim(seq, digest, parts[3], False)
    seq, digest = parse_anchor(stripped)
    return AnchorClaim(seq, digest, None, False)


def claim_reports(store: StoreCore, claim: AnchorClaim) -> list[VerifyReport]:
    """The failures ``claim`` shows beside ``verify --all``: the ledger no longer
    holds the anchored head (``(ledger)``), or the store the anchor names as keyed
    cannot be vouched for (``(key)``): no key, another key, or its fingerprint gone."""
    ledger = _tree_report(store, claim) if claim.signed else _ledger_report(store, claim)
    return [*([] if ledger is None else [ledger]), *_key_reports(store, claim)]


def _ledger_report(store: StoreCore, claim: AnchorClaim) -> VerifyReport | None:
    with store.transaction(write=False) as conn:
        state = verify_ledger(conn, store.chain_hash)
    if state.hashes.get(claim.size) == claim.digest:
        return None
    why = (
        "ledger cut short before the anchor"
        if claim.size > len(state.hashes)
        else "ledger rewritten before the anchor"
    )
    return VerifyReport(LEDGER_ID, False, len(state.hashes), claim.size, why)


def _tree_report(store: StoreCore, claim: AnchorClaim) -> VerifyReport | None:
    try:
        tree = ledger_tree(ledger_entries(store))
    except ConvergeError as exc:
        return VerifyReport(LEDGER_ID, False, 0, claim.size or 1, str(exc))
    if claim.size > tree.size:
        why = "ledger cut short before the signed head"
        return VerifyReport(LEDGER_ID, False, tree.size, claim.size, why)
    if tree.root(claim.size).hex() != claim.digest:
        why = "ledger rewritten before the signed head"
        return VerifyReport(LEDGER_ID, False, tree.size, claim.size, why)
    return None


def _key_reports(store: StoreCore, claim: AnchorClaim) -> list[VerifyReport]:
    if claim.keyed is None:
        return []
    stored = stored_fingerprint(store)
    gone = (
        ""
        if stored == claim.keyed
        else (
            "; the store no longer records that key's fingerprint"
            if stored is None
            else f"; the store now records another key's fingerprint ({stored})"
        )
    )
    at = claim.size or 1
    if store.key is None:
        why = (
            f"cannot vouch for this store: the anchor names it keyed (key fingerprint "
            f"{claim.keyed}) and CONVERGE_AUDIT_KEY is not set{gone}"
        )
        return [VerifyReport(KEY_ID, False, 0, at, why)]
    mine = key_fingerprint(store.key)
    if mine != claim.keyed:
        why = f"wrong key: the anchor names key fingerprint {claim.keyed}, yours is {mine}"
        return [VerifyReport(KEY_ID, False, 0, at, why)]
    if gone:
        why = f"key fingerprint changed: the anchor names this store keyed{gone}"
        return [VerifyReport(KEY_ID, False, 0, at, why)]
    return []
