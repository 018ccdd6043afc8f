"""An independent verifier of converge proof bundles, written from docs/audit-format.md.

It imports nothing of converge: the standard library, and ``cryptography`` for the
Ed25519 check only. ``python examples/verify_bundle.py FILE PUBLIC_KEY`` prints one
line per check and exits 0 when every check passes, 1 when any fails, 2 when FILE
is not a bundle. :func:`verify_inclusion` and :func:`verify_consistency` are RFC 9162
§2.1.3.2 and §2.1.4.2 on raw bytes.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

RFC6962, LEGACY = "rfc6962", "sha256"
PREFIX = {RFC6962: (b"\x00", b"\x01"), LEGACY: (b"", b"")}
GENESIS = "0" * 64


def _h(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def leaf(data: bytes, scheme: str = RFC6962) -> bytes:
    """The leaf hash of ``data``."""
    return _h(PREFIX[scheme][0] + data)


def node(left: bytes, right: bytes, scheme: str = RFC6962) -> bytes:
    """The hash of an inner node."""
    return _h(PREFIX[scheme][1] + left + right)


def tree_root(leaves: Sequence[bytes], scheme: str = RFC6962) -> bytes:
    """The Merkle tree hash over leaf hashes (RFC 6962 §2.1), iteratively."""
    if not leaves:
        return _h(b"")
    level = list(leaves)
    while len(level) > 1:
        nxt = [node(level[i], level[i + 1], scheme) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]


def _check_hash(value: bytes) -> None:
    if not isinstance(value, bytes) or len(value) != 32:
        raise ValueError("a hash is 32 bytes")


def verify_inclusion(
    leaf_hash: bytes,
    index: int,
    size: int,
    proof: Sequence[bytes],
    root: bytes,
    scheme: str = RFC6962,
) -> bool:
    """RFC 9162 §2.1.3.2: ``proof`` leads from ``leaf_hash`` at ``index`` to ``root``."""
    for value in (leaf_hash, root, *proof):
        _check_hash(value)
    if index < 0 or index >= size:
        return False
    fn, sn, r = index, size - 1, leaf_hash
    for p in proof:
        if sn == 0:
            return False
        if fn % 2 == 1 or fn == sn:
            r = node(p, r, scheme)
            while fn % 2 == 0 and fn != 0:
                fn //= 2
                sn //= 2
        else:
            r = node(r, p, scheme)
        fn //= 2
        sn //= 2
    return sn == 0 and r == root


def verify_consistency(
    size1: int, size2: int, proof: Sequence[bytes], root1: bytes, root2: bytes
) -> bool:
    """RFC 9162 §2.1.4.2: the tree of ``size1`` leaves is a prefix of that of ``size2``."""
    for value in (root1, root2, *proof):
        _check_hash(value)
    if size1 < 0 or size2 < size1:
        return False
    if size1 == size2:
        return len(proof) == 0 and root1 == root2
    if size1 == 0:
        return len(proof) == 0
    if len(proof) == 0:
        return False
    path = list(proof)
    if size1 & (size1 - 1) == 0:
        path = [root1, *path]
    fn, sn = size1 - 1, size2 - 1
    while fn % 2 == 1:
        fn //= 2
        sn //= 2
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn % 2 == 1 or fn == sn:
            fr, sr = node(c, fr), node(c, sr)
            while fn % 2 == 0 and fn != 0:
                fn //= 2
                sn //= 2
        else:
            sr = node(sr, c)
        fn //= 2
        sn //= 2
    return sn == 0 and fr == root1 and sr == root2


def canonical(value: Any) -> bytes:
    """Sorted keys, no spaces, UTF-8 (non-ASCII kept)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def check_signature(public_pem: bytes, signed: dict[str, Any]) -> str | None:
    """Why ``signed`` does not verify with the key (None: it does). The only use of
    ``cryptography``."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    key = serialization.load_pem_public_key(public_pem)
    if not isinstance(key, Ed25519PublicKey):
        return "the public key is not Ed25519"
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    if signed.get("key_id") != hashlib.sha256(raw).hexdigest()[:16]:
        return "signed by another key"
    body = {k: v for k, v in signed.items() if k != "sig"}
    try:
        key.verify(bytes.fromhex(signed["sig"]), canonical(body))
    except (InvalidSignature, ValueError, KeyError, TypeError):
        return "signature does not verify"
    return None


def _ledger_leaf(e: dict[str, Any]) -> bytes:
    keys = ("head", "last_seq", "run_id", "seq")
    return leaf(canonical({k: e[k] for k in keys}))


def checks(bundle: dict[str, Any], public_pem: bytes) -> list[tuple[str, bool]]:
    """(name, ok) of every check, in the order docs/audit-format.md lists them."""
    out: list[tuple[str, bool]] = []

    def check(name: str, fn: Callable[[], bool]) -> None:
        try:
            out.append((name, bool(fn())))
        except (KeyError, TypeError, ValueError, IndexError, AttributeError):
            out.append((name, False))

    run, head, ledger = (
        bundle.get("run") or {},
        bundle.get("signed_head") or {},
        bundle.get("ledger"),
    )
    scheme = run.get("facts_merkle", LEGACY)
    check(
        "format",
        lambda: (
            bundle.get("format") == "converge.bundle/1" and bundle.get("kind") in ("run", "fact")
        ),
    )
    check(
        "signed head signature",
        lambda: (
            head.get("type") == "converge.ledger_head/1"
            and check_signature(public_pem, head) is None
        ),
    )
    check(
        "run statement signature",
        lambda: run.get("type") == "converge.run/1" and check_signature(public_pem, run) is None,
    )
    at_stop = bundle.get("facts_root_signature")
    if at_stop is not None:
        check(
            "facts root signature",
            lambda: (
                check_signature(public_pem, at_stop) is None
                and all(at_stop[k] == run[k] for k in ("run_id", "facts_root", "facts_count"))
            ),
        )
    if bundle.get("kind") == "fact":
        f = bundle["fact"]
        check(
            "fact inclusion",
            lambda: verify_inclusion(
                leaf(f["text"].encode(), scheme),
                f["index"],
                run["facts_count"],
                [bytes.fromhex(p) for p in f["proof"]],
                bytes.fromhex(run["facts_root"]),
                scheme,
            ),
        )
    else:
        events, facts = bundle.get("events"), bundle.get("facts")
        try:
            parsed: Any = [json.loads(e["message"]) for e in events]
        except (TypeError, ValueError, KeyError):
            parsed = None  # every check that reads the events fails
        check("events root", lambda: _events_root(events, run))
        check("event chain", lambda: _chain(events, parsed, run))
        check("facts", lambda: _facts(facts, parsed))
        check("facts root", lambda: _facts_root(facts, parsed, run, scheme))
        check("checkpoint", lambda: _checkpoint(bundle.get("checkpoint"), parsed))
    check(
        "ledger entry",
        lambda: (
            ledger["index"] == ledger["entry"]["seq"] - 1
            and all(
                ledger["entry"][k] == run[k2]
                for k, k2 in (("run_id", "run_id"), ("last_seq", "last_seq"), ("head", "head"))
            )
        ),
    )
    check(
        "ledger inclusion",
        lambda: verify_inclusion(
            _ledger_leaf(ledger["entry"]),
            ledger["index"],
            head["size"],
            [bytes.fromhex(p) for p in ledger["proof"]],
            bytes.fromhex(head["root"]),
        ),
    )
    return out


def _events_root(events: list[dict[str, Any]], run: dict[str, Any]) -> bool:
    root = tree_root([leaf(e["message"].encode()) for e in events])
    return len(events) == run["events_count"] and root.hex() == run["events_root"]


def _promoted(parsed: list[dict[str, Any]]) -> list[Any]:
    """The facts the events promote: the initial ones, then each ``fact_promoted``."""
    out: list[Any] = []
    for p in parsed:
        if p["kind"] == "run_started":
            out.extend(p["payload"].get("initial_facts", []))
        elif p["kind"] == "fact_promoted":
            out.append(p["payload"])
    return out


def _facts(facts: list[str], parsed: list[dict[str, Any]]) -> bool:
    promoted = _promoted(parsed)
    return len(facts) == len(promoted) and all(
        json.loads(t) == f for t, f in zip(facts, promoted, strict=True)
    )


def _facts_root(
    facts: list[str], parsed: list[dict[str, Any]], run: dict[str, Any], scheme: str
) -> bool:
    root = tree_root([leaf(t.encode(), scheme) for t in facts], scheme).hex()
    stops = [p for p in parsed if p["kind"] in ("run_stopped", "run_paused")]
    return (
        len(facts) == run["facts_count"]
        and root == run["facts_root"]
        and stops[-1]["payload"]["facts_root"] == root
    )


def _checkpoint(blob: str | None, parsed: list[dict[str, Any]]) -> bool:
    if blob is None:
        return True
    saved = [
        p
        for p in parsed
        if p["kind"] in ("run_stopped", "run_paused", "checkpoint_saved")
        and "checkpoint_sha256" in p["payload"]
    ]
    digest = hashlib.sha256(blob.encode()).hexdigest()
    return bool(saved) and digest == saved[-1]["payload"]["checkpoint_sha256"]


def _chain(events: list[dict[str, Any]], parsed: list[dict[str, Any]], run: dict[str, Any]) -> bool:
    if len(events) != run["last_seq"]:
        return False
    if any(p["seq"] != i or p["run_id"] != run["run_id"] for i, p in enumerate(parsed, 1)):
        return False
    if run["chain"] != "sha256":
        return True  # an HMAC chain needs the secret key; the signed events root covers it
    prev = GENESIS
    for e in events:
        prev = hashlib.sha256((prev + e["message"]).encode()).hexdigest()
        if prev != e["hash"]:
            return False
    return prev == run["head"]


def main(argv: list[str]) -> int:
    """``verify_bundle.py FILE PUBLIC_KEY``: 0 all checks pass, 1 one fails, 2 bad input."""
    if len(argv) != 2:
        print("usage: verify_bundle.py FILE PUBLIC_KEY", file=sys.stderr)
        return 2
    try:
        with open(argv[0], encoding="utf-8") as f:
            bundle = json.load(f)
        with open(argv[1], "rb") as f:
            public_pem = f.read()
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not isinstance(bundle, dict):
        print("error: not a proof bundle", file=sys.stderr)
        return 2
    results = checks(bundle, public_pem)
    for name, ok in results:
        print(f"{'ok' if ok else 'FAILED'} {name}")
    return 0 if all(ok for _, ok in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
