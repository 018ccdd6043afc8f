"""Verifying a proof bundle offline, with the public key alone (docs/audit-format.md).

No database: :func:`verify_bundle` reads the bundle's JSON and says, check by
check, what it verified — the signatures, the events' chain and root, the facts
against the events and their root, the checkpoint, the ledger entry and its
inclusion in the signed head — or, for a one-fact bundle, the fact's audit path
to the signed facts root. Every check runs, so that a tampered bundle names each
part that does not fit.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from audit.bundles import FORMAT, RUN_TYPE
from audit.chain import GENESIS, PLAIN
from audit.crosscheck import CHECKPOINTED, TERMINAL
from audit.ledger import entry_message
from audit.merkle import MerkleTree, leaf_hash, verify_inclusion
from audit.proofs import HEAD_TYPE
from audit.signing import check_signature
from engine.integrity import merkle_scheme


@dataclass(frozen=True, slots=True)
class Check:
    """One check of a bundle: its name, whether it passed, what it found."""

    name: str
    ok: bool
    detail: str

    def to_dict(self) -> dict[str, Any]:
        """``{"name", "ok", "detail"}``."""
        return asdict(self)


class BundleError(ValueError):
    """The file is not a proof bundle (not JSON, another format)."""


def read_bundle(path: Path) -> dict[str, Any]:
    """The bundle at ``path``; raises ``BundleError`` naming the file."""
    try:
        data = _loads(path.read_bytes())
    except OSError as exc:
        raise BundleError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:  # orjson's is a subclass
        raise BundleError(f"{path} is not a JSON proof bundle: {exc}") from exc
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise BundleError(f"{path} is not a proof bundle (format {FORMAT!r})")
    return data


def _loads(text: str | bytes) -> Any:
    """JSON text → value: orjson (fast: a 100k-fact bundle parses 200k texts), and
    ``json`` for what orjson refuses but JSON allows (integers past 64 bits)."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def _hex(value: Any) -> bytes:
    if not isinstance(value, str) or len(value) != 64:
        raise ValueError(f"{value!r} is not a 64-digit hex hash")
    return bytes.fromhex(value)


def verify_bundle(bundle: dict[str, Any], public: Ed25519PublicKey) -> list[Check]:
    """Every check of ``bundle`` (a run or a one-fact bundle), in order."""
    checks: list[Check] = []

    def check(name: str, fn: Callable[[], str | tuple[bool, str]]) -> None:
        try:
            found = fn()
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
            found = (False, f"malformed: {type(exc).__name__}: {exc}")
        ok, detail = (True, found) if isinstance(found, str) else found
        checks.append(Check(name, ok, detail))

    run = bundle.get("run") or {}
    head = bundle.get("signed_head") or {}
    check("format", lambda: _format(bundle))
    check("signed head signature", lambda: _signature(public, head, HEAD_TYPE))
    check("run statement signature", lambda: _signature(public, run, RUN_TYPE))
    if bundle.get("facts_root_signature") is not None:
        check("facts root signature", lambda: _at_stop(public, bundle["facts_root_signature"], run))
    if bundle.get("kind") == "fact":
        check("fact inclusion", lambda: _fact(bundle["fact"], run))
    else:
        events = bundle.get("events") or []
        parsed: list[dict[str, Any]] = []
        check("events root", lambda: _events_root(events, run))
        check("event chain", lambda: _chain(events, run, parsed))
        check("facts", lambda: _facts(bundle.get("facts"), parsed))
        check("facts root", lambda: _facts_root(bundle.get("facts"), run, parsed))
        check("checkpoint", lambda: _checkpoint(bundle.get("checkpoint"), parsed))
    check("ledger entry", lambda: _entry(bundle["ledger"], run))
    check("ledger inclusion", lambda: _inclusion(bundle["ledger"], head))
    return checks


def _format(bundle: dict[str, Any]) -> str | tuple[bool, str]:
    if bundle.get("format") != FORMAT or bundle.get("kind") not in ("run", "fact"):
        return False, f"not a {FORMAT} run or fact bundle"
    return f"{FORMAT}, kind {bundle['kind']}"


def _signature(
    public: Ed25519PublicKey, signed: dict[str, Any], kind: str
) -> str | tuple[bool, str]:
    if signed.get("type") != kind:
        return False, f"not a {kind} statement"
    why = check_signature(public, signed)
    return (False, why) if why else f"Ed25519 signature by key {signed['key_id']} verifies"


def _at_stop(
    public: Ed25519PublicKey, signed: dict[str, Any], run: dict[str, Any]
) -> str | tuple[bool, str]:
    why = check_signature(public, signed)
    if why:
        return False, why
    if (signed.get("run_id"), signed.get("facts_root"), signed.get("facts_count")) != (
        run.get("run_id"),
        run.get("facts_root"),
        run.get("facts_count"),
    ):
        return False, "the facts root signed at the stop is not the run statement's"
    return "the facts root was signed when the run stopped"


def _events_root(events: list[dict[str, Any]], run: dict[str, Any]) -> str | tuple[bool, str]:
    tree = MerkleTree([leaf_hash(e["message"].encode()) for e in events])
    if len(events) != run["events_count"]:
        return False, f"{len(events)} events, the run statement says {run['events_count']}"
    if tree.root() != _hex(run["events_root"]):
        return False, "the events' RFC 6962 root differs from the signed run statement's"
    return f"{len(events)} events hash to the signed events root"


def _chain(
    events: list[dict[str, Any]], run: dict[str, Any], parsed: list[dict[str, Any]]
) -> str | tuple[bool, str]:
    sha = hashlib.sha256
    prev = GENESIS
    bad: str | None = None
    parsed.extend([_loads(e["message"]) for e in events])  # all, or none
    for i, (e, p) in enumerate(zip(events, parsed, strict=True), 1):
        message = e["message"]
        if bad is None and (p.get("seq") != i or p.get("run_id") != run["run_id"]):
            bad = f"event {i}: seq or run id out of place"
        if run["chain"] == PLAIN:
            prev = sha((prev + message).encode()).hexdigest()
            if bad is None and prev != e["hash"]:
                bad = f"event seq {i} changed (its hash does not chain)"
    if bad is not None:
        return False, bad
    if len(events) != run["last_seq"]:
        return False, f"{len(events)} events, the run's chain has {run['last_seq']}"
    if run["chain"] != PLAIN:
        return (
            f"{len(events)} events in order; their {run['chain']} chain needs the secret "
            "key (the signed events root covers them)"
        )
    if prev != run["head"]:
        return False, "the chain's last hash is not the run statement's head"
    return f"{len(events)} events chained (sha256) to head {prev[:16]}…"


def _promoted(parsed: list[dict[str, Any]]) -> list[tuple[int, Any]]:
    """(seq, fact dict) of every fact the events promote, initial facts first."""
    out: list[tuple[int, Any]] = []
    for p in parsed:
        if p["kind"] == "run_started":
            out.extend((p["seq"], f) for f in p["payload"].get("initial_facts", ()))
        elif p["kind"] == "fact_promoted":
            out.append((p["seq"], p["payload"]))
    return out


def _facts(facts: Any, parsed: list[dict[str, Any]]) -> str | tuple[bool, str]:
    if not parsed:
        return False, "no events to compare the facts with"
    promoted = _promoted(parsed)
    first = next(
        (
            (i, seq)
            for i, (text, (seq, fact)) in enumerate(zip(facts, promoted, strict=False))
            if _loads(text) != fact
        ),
        None,
    )
    counts = f"{len(facts)} facts, the events promote {len(promoted)}"
    at = "" if first is None else f" (from fact {first[0]}, event seq {first[1]})"
    if len(facts) < len(promoted):
        return False, f"fact removed: {counts}{at}"
    if len(facts) > len(promoted):
        return False, f"fact added: {counts}{at}"
    if first is not None:
        return False, f"fact {first[0]} differs from the fact event seq {first[1]} records"
    return f"{len(facts)} facts, each the one its event records"


def _facts_root(
    facts: Any, run: dict[str, Any], parsed: list[dict[str, Any]]
) -> str | tuple[bool, str]:
    scheme = merkle_scheme(run.get("facts_merkle"))
    root = MerkleTree([leaf_hash(f.encode(), scheme) for f in facts], scheme).root().hex()
    stops = [p for p in parsed if p["kind"] in TERMINAL]
    recorded = stops[-1]["payload"].get("facts_root") if stops else None
    if len(facts) != run["facts_count"]:
        return False, f"{len(facts)} facts, the run statement says {run['facts_count']}"
    if root != run["facts_root"]:
        return False, f"the facts' {scheme} root {root[:16]}… is not the signed facts root"
    if recorded != root:
        return False, "the facts root the run's last stop recorded differs"
    return f"recomputed from {len(facts)} facts ({scheme}): {root[:16]}…"


def _checkpoint(blob: str | None, parsed: list[dict[str, Any]]) -> str | tuple[bool, str]:
    if blob is None:
        return "none kept (the stop is final)"
    saved = [p for p in parsed if p["kind"] in CHECKPOINTED and "checkpoint_sha256" in p["payload"]]
    if not saved:
        return False, "a checkpoint no event records"
    if hashlib.sha256(blob.encode()).hexdigest() != saved[-1]["payload"]["checkpoint_sha256"]:
        return False, f"the checkpoint differs from the sha256 event seq {saved[-1]['seq']} records"
    return f"its sha256 is the one event seq {saved[-1]['seq']} records"


def _fact(fact: dict[str, Any], run: dict[str, Any]) -> str | tuple[bool, str]:
    scheme = merkle_scheme(run.get("facts_merkle"))
    leaf = leaf_hash(fact["text"].encode(), scheme)
    proof = [_hex(p) for p in fact["proof"]]
    if not verify_inclusion(
        leaf, fact["index"], run["facts_count"], proof, _hex(run["facts_root"]), scheme
    ):
        return False, "the fact's audit path does not lead to the signed facts root"
    fid = json.loads(fact["text"]).get("id")
    return f"fact {fid} is leaf {fact['index']} of {run['facts_count']} under the signed facts root"


def _entry(part: dict[str, Any], run: dict[str, Any]) -> str | tuple[bool, str]:
    e = part["entry"]
    if (e["run_id"], e["last_seq"], e["head"]) != (run["run_id"], run["last_seq"], run["head"]):
        return False, "the ledger entry is not the run statement's (run id, last seq, head)"
    if part["index"] != e["seq"] - 1:
        return False, f"entry seq {e['seq']} is not leaf {part['index']}"
    return f"ledger entry {e['seq']} holds the run's head"


def _inclusion(part: dict[str, Any], head: dict[str, Any]) -> str | tuple[bool, str]:
    e = part["entry"]
    leaf = leaf_hash(entry_message(e["seq"], e["run_id"], e["last_seq"], e["head"]).encode())
    proof = [_hex(p) for p in part["proof"]]
    if not verify_inclusion(leaf, part["index"], head["size"], proof, _hex(head["root"])):
        return False, "the inclusion proof does not lead to the signed head's root"
    return f"leaf {part['index']} of the signed ledger head of size {head['size']}"
