"""The formats the independent verifier (examples/verify_bundle.py) reads, written
from docs/audit-format.md: the types of a bundle's fields (:data:`SHAPES`), and the
C2SP formats of converge's checkpoints (the specs c2sp.org/signed-note,
c2sp.org/tlog-checkpoint and c2sp.org/tlog-cosignature), and the salted
commitments of chain format 2 (:func:`commitment`, :func:`committed`,
:func:`checkpoint_digest`).

The standard library, and ``cryptography`` for the Ed25519 checks only. A note is
a text, a blank line, then lines ``— NAME base64(4-byte key hash ‖ signature)``;
the key hash is ``sha256(NAME ‖ 0x0A ‖ type ‖ public key)[:4]``, type 0x01 for a
log's signature of the text, 0x04 for a witness's cosignature (8-byte time ‖
Ed25519 over ``"cosignature/v1\\ntime T\\n"`` ‖ text). converge names a log key
``converge/`` followed by the first 16 hex digits of the sha256 of its raw key.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

DASH = "\u2014 "
V2, V1 = "converge.bundle/2", "converge.bundle/1"


class Maybe:
    """A field that may be missing or null."""

    def __init__(self, spec: Any) -> None:
        self.spec = spec


class Each:
    """An object whose every value is of ``spec`` (names are strings in JSON)."""

    def __init__(self, spec: Any) -> None:
        self.spec = spec


_SIGNED = {"type": str, "key_id": str, "sig": str}
_COMMON = {
    "run": {
        **_SIGNED,
        **{"run_id": str, "chain": str, "last_seq": int, "head": str, "events_count": int},
        **{"events_root": str, "facts_count": int, "facts_root": str, "facts_merkle": Maybe(str)},
    },
    "facts_root_signature": Maybe(
        {**_SIGNED, "run_id": str, "facts_root": str, "facts_count": int}
    ),
    "ledger": {
        "entry": {"seq": int, "run_id": str, "last_seq": int, "head": str},
        "index": int,
        "proof": [str],
    },
    "signed_head": {**_SIGNED, "size": int, "root": str},
    "ledger_checkpoint": Maybe(str),
}
_RUN = {"checkpoint": Maybe(str), "deciders": Maybe(Each(str))}
SHAPES: dict[tuple[Any, Any], Any] = {
    (V2, "run"): {
        **_COMMON,
        **_RUN,
        "events": [{"cycle": int, "kind": str, "payload": str, "ts": str, "hash": str}],
        "initial_facts": [str],
    },
    (V1, "run"): {**_COMMON, **_RUN, "events": [{"message": str, "hash": str}], "facts": [str]},
    (V2, "fact"): {**_COMMON, "fact": {"text": str, "index": int, "proof": [str]}},
}
"""The types of a bundle's fields by (format, kind) (docs/audit-format.md, "Bundle
layout"); a field not named here may be there."""
SHAPES[V1, "fact"] = SHAPES[V2, "fact"]
V3 = "converge.bundle/3"  # runs of chain format 2: the layout of /2
SHAPES[V3, "run"], SHAPES[V3, "fact"] = SHAPES[V2, "run"], SHAPES[V2, "fact"]


def shape_problem(value: Any, spec: Any, path: str = "") -> str | None:
    """``"FIELD.PATH: what is wrong"`` for the first field of ``value`` missing or not
    of ``spec`` (a type, ``[spec]`` a list, a dict of fields, :class:`Maybe`, :class:`Each`)."""
    if isinstance(spec, Maybe):
        return None if value is None else shape_problem(value, spec.spec, path)
    if isinstance(spec, dict | Each):
        if not isinstance(value, dict):
            return f"{path or '(the bundle)'}: an object is expected"
        fields = spec.items() if isinstance(spec, dict) else ((k, spec.spec) for k in value)
        for name, sub in fields:
            where = f"{path}.{name}" if path else name
            if name not in value:
                if isinstance(sub, Maybe):
                    continue
                return f"{where}: missing"
            found = shape_problem(value[name], sub, where)
            if found:
                return found
        return None
    if isinstance(spec, list):
        if not isinstance(value, list):
            return f"{path}: a list is expected"
        return next(
            (p for i, v in enumerate(value) if (p := shape_problem(v, spec[0], f"{path}[{i}]"))),
            None,
        )
    if isinstance(value, spec) and not (spec is int and isinstance(value, bool)):
        return None
    return f"{path}: {'an integer' if spec is int else 'a string'} is expected"


def raw_key(public_pem: bytes) -> bytes:
    """The raw 32-byte Ed25519 key of a PEM public key (``ValueError`` for another)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    key = serialization.load_pem_public_key(public_pem)
    if not isinstance(key, Ed25519PublicKey):
        raise ValueError("the public key is not Ed25519")
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_hash(name: str, kind: int, raw: bytes) -> bytes:
    """The 4-byte key hash of a key's name, signature type and raw public key."""
    return hashlib.sha256(name.encode() + b"\n" + bytes([kind]) + raw).digest()[:4]


def log_vkey(public_pem: bytes) -> tuple[str, int, bytes]:
    """(name, type 0x01, raw key) of the key that signs a converge store's checkpoints."""
    raw = raw_key(public_pem)
    return f"converge/{hashlib.sha256(raw).hexdigest()[:16]}", 0x01, raw


def parse_vkey(text: str) -> tuple[str, int, bytes]:
    """``NAME+HASH+BASE64(type ‖ key)`` → (name, type, raw key); ``ValueError`` for
    text that is not an Ed25519 verifier key whose hash is its key's."""
    name, hash_hex, material = text.strip().split("+", 2)
    key = base64.b64decode(material, validate=True)
    if len(key) != 33 or bytes.fromhex(hash_hex) != key_hash(name, key[0], key[1:]):
        raise ValueError("not an Ed25519 verifier key whose hash is its key's")
    return name, key[0], key[1:]


def parse_note(data: str) -> tuple[str, list[tuple[str, bytes, bytes]]]:
    """A signed note → (its text, [(name, key hash, signature)]); ``ValueError`` for none."""
    if any(c < " " and c != "\n" for c in data):
        raise ValueError("a control character")
    split = data.rfind("\n\n")
    if split < 0 or not data.endswith("\n") or split + 2 == len(data):
        raise ValueError("no signature lines")
    sigs = []
    for line in data[split + 2 : -1].split("\n"):
        name, _, b64 = line.removeprefix(DASH).partition(" ")
        raw = base64.b64decode(b64, validate=True)
        if not line.startswith(DASH) or not name or len(raw) < 5:
            raise ValueError("a bad signature line")
        sigs.append((name, raw[:4], raw[4:]))
    return data[: split + 1], sigs


def checkpoint(text: str) -> tuple[str, int, bytes]:
    """A checkpoint's text → (origin, tree size, root); ``ValueError`` for another text."""
    origin, size, root = text.split("\n")[:3]
    if not origin or not size.isdigit() or (size != "0" and size[0] == "0"):
        raise ValueError("not a checkpoint")
    return origin, int(size), base64.b64decode(root, validate=True)


def _verify(raw: bytes, signature: bytes, message: bytes) -> bool:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        Ed25519PublicKey.from_public_bytes(raw).verify(signature, message)
    except (InvalidSignature, ValueError):
        return False
    return True


def signed(data: str, vkey: tuple[str, int, bytes]) -> bool:
    """Whether the note carries a valid signature (type 0x01) of ``vkey``."""
    name, kind, raw = vkey
    text, sigs = parse_note(data)
    wanted = (name, key_hash(name, kind, raw))
    found = [sig for n, h, sig in sigs if (n, h) == wanted]
    return kind == 0x01 and bool(found) and _verify(raw, found[0], text.encode())


def cosigned(data: str, vkey: tuple[str, int, bytes]) -> bool:
    """Whether the note carries a valid cosignature/v1 (type 0x04) of ``vkey``."""
    name, kind, raw = vkey
    text, sigs = parse_note(data)
    wanted = (name, key_hash(name, kind, raw))
    found = [sig for n, h, sig in sigs if (n, h) == wanted]
    if kind != 0x04 or not found or len(found[0]) != 72:
        return False
    when = int.from_bytes(found[0][:8], "big")
    message = f"cosignature/v1\ntime {when}\n{text}".encode()
    return when < 1 << 63 and _verify(raw, found[0][8:], message)


def ledger_checkpoint(bundle: dict[str, Any], public_pem: bytes) -> bool:
    """The bundle's checkpoint note is signed by the store's key and names the size
    and root of its signed head."""
    note, head = bundle["ledger_checkpoint"], bundle["signed_head"]
    _origin, size, root = checkpoint(parse_note(note)[0])
    return signed(note, log_vkey(public_pem)) and (size, root.hex()) == (head["size"], head["root"])


__all__ = [
    "SHAPES",
    "Each",
    "Maybe",
    "checkpoint",
    "cosigned",
    "key_hash",
    "ledger_checkpoint",
    "log_vkey",
    "parse_note",
    "parse_vkey",
    "raw_key",
    "shape_problem",
    "signed",
]


def canonical(value: Any) -> bytes:
    """Sorted keys, no spaces, UTF-8 (non-ASCII kept)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


# -- chain format 2 (docs/audit-format.md, "Format 2"): facts by salted commitments --
def commitment(fact: Any) -> str:
    """C of a stored fact (a JSON text or value): its ``commitment`` once redacted,
    else SHA-256(salt ‖ canonical JSON of the fact without its salt), hex."""
    f = json.loads(fact) if isinstance(fact, str) else fact
    if "commitment" in f:
        return str(f["commitment"])
    body = canonical({k: v for k, v in f.items() if k != "salt"})
    return hashlib.sha256(bytes.fromhex(f["salt"]) + body).hexdigest()


def committed(kind: str, payload: str) -> str:
    """The payload text a format-2 event chains: each fact as ``{"commitment":C}``."""
    if kind == "fact_promoted":
        return canonical({"commitment": commitment(payload)}).decode()
    p = json.loads(payload)
    if kind != "run_started" or not p.get("initial_facts"):
        return payload
    p["initial_facts"] = [{"commitment": commitment(f)} for f in p["initial_facts"]]
    return canonical(p).decode()


REDACTED, MARK = "fact_redacted", '"redacted":{'
"""The event of a redaction; MARK is in the text of every redacted fact."""


def redaction_problem(marked: list[tuple[int, str, str]]) -> str | None:
    """Why a redacted fact disagrees with the chained ``fact_redacted`` events, or
    None (the check of the store's verify, in its words). ``marked``: (seq, kind,
    payload text) of each fact_redacted event, and of each fact_promoted or
    run_started of a chain of format 2 whose text holds a redaction marker. The
    chain hashes such a fact by its commitment alone: this check is what catches a
    marker edited, a fact blanked by hand, or a redacted content put back."""
    events: dict[str, tuple[int, dict[str, Any]]] = {}
    stored: list[tuple[int, Any]] = []
    for seq, kind, text in marked:
        p = json.loads(text)
        if kind == REDACTED:
            fid = p.get("fact_id") if isinstance(p, dict) else None
            if not isinstance(fid, str):
                return f"event seq {seq}: fact_redacted names no fact"
            if fid in events:
                return f"event seq {seq}: fact {fid} is redacted twice"
            events[fid] = (seq, p)
        elif kind == "fact_promoted":
            stored.append((seq, p))
        else:
            stored += [(seq, f) for f in p.get("initial_facts") or ()]
    seen = set()
    for seq, fact in stored:
        fid, mark = (fact.get("id"), fact.get("content")) if isinstance(fact, dict) else (0, 0)
        if not isinstance(fid, str) or not isinstance(mark, dict):
            continue
        if "redacted" not in mark or "commitment" not in fact:
            continue
        seen.add(fid)
        if fid not in events:
            return f"event seq {seq}: fact {fid} is redacted without a fact_redacted event"
        at, event = events[fid]
        if fact.get("commitment") != event.get("commitment"):
            why = f"fact {fid}'s commitment differs from its fact_redacted (seq {at})"
            return f"event seq {seq}: {why}"
        if mark.get("redacted") != {k: event.get(k) for k in ("at", "by", "reason")}:
            why = f"fact {fid}'s redaction marker differs from its fact_redacted (seq {at})"
            return f"event seq {seq}: {why}"
    for fid, (at, _) in events.items():
        if fid not in seen:
            why = f"fact_redacted names fact {fid}, which the run does not hold redacted"
            return f"event seq {at}: {why}"
    return None


def checkpoint_digest(blob: str) -> str:
    """A checkpoint's sha256; of format 2 with its facts inline, over the canonical
    JSON of it with each fact row ``[..8 fields, salt]`` replaced by its C."""
    data = json.loads(blob)
    rows = data.get("facts") if isinstance(data, dict) else None
    if not isinstance(rows, list) or data.get("facts_merkle") != "rfc6962-salted":
        return hashlib.sha256(blob.encode()).hexdigest()
    commits = [
        commitment(r if isinstance(r, dict) else r[8] if isinstance(r[8], dict) else _fact(r))
        for r in rows
    ]
    return hashlib.sha256(canonical({**data, "facts": commits})).hexdigest()


def _fact(r: list[Any]) -> dict[str, Any]:
    """A fact row ``[id, key, content, confidence, suggestor, cycle, proposal_id,
    parents, salt]`` as the fact's dict with its salt."""
    prov = {"suggestor": r[4], "cycle": r[5], "proposal_id": r[6], "parents": r[7]}
    return {
        "id": r[0],
        "key": r[1],
        "content": r[2],
        "confidence": r[3],
        "provenance": prov,
        "salt": r[8],
    }
