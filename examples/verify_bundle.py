"""An independent verifier of converge proof bundles, written from docs/audit-format.md.

It imports nothing of converge: the standard library, ``cryptography`` for the
Ed25519 check only, and ``verify_formats.py`` beside it (the C2SP checkpoint formats).
``python examples/verify_bundle.py FILE PUBLIC_KEY [--witness VKEY]`` prints one
line per check and exits 0 when every check passes, 1 when any fails, 2 when FILE
is not a bundle; with ``--witness`` (a witness's verifier key, or its file) the
bundle's checkpoint must carry that witness's cosignature. It reads
``converge.bundle/3`` (runs of chain format 2: facts by salted commitments),
``converge.bundle/2`` and the first layout, ``converge.bundle/1``.
:func:`verify_inclusion` and :func:`verify_consistency` are RFC 9162 §2.1.3.2 and
§2.1.4.2 on raw bytes.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

try:  # beside this file: run as a script, examples/ is on sys.path
    from examples import verify_formats as formats
except ImportError:
    import verify_formats as formats  # type: ignore[no-redef]

V3, V2, V1 = "converge.bundle/3", "converge.bundle/2", "converge.bundle/1"
READ = ("run_started", "run_stopped", "run_paused", "checkpoint_saved")
SIGNED = ("gate_decided", "gate_vote")  # events that may carry a signed decision
FACT_KINDS = ("fact_promoted", "run_started")
RFC6962, LEGACY, SALTED = "rfc6962", "sha256", "rfc6962-salted"
PREFIX = {RFC6962: (b"\x00", b"\x01"), LEGACY: (b"", b""), SALTED: (b"\x00", b"\x01")}
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
    sha, prefix = hashlib.sha256, PREFIX[scheme][1]  # inlined: 100k leaves
    level = list(leaves)
    while len(level) > 1:
        nxt = [sha(prefix + level[i] + level[i + 1]).digest() for i in range(0, len(level) - 1, 2)]
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
    """RFC 9162 §2.1.4.2: the tree of ``size1`` leaves is a prefix of that of ``size2``;
    never from the empty tree (no proof says anything), as transparency-dev has it."""
    if size1 <= 0 or size2 < size1:
        return False
    if size1 == size2:  # the same tree: no proof, the same root (of any length)
        return len(proof) == 0 and root1 == root2
    for value in (root1, root2, *proof):
        _check_hash(value)
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


def fact_leaf(text: str, scheme: str) -> bytes:
    """A fact's leaf: of its salted commitment (SALTED, chain format 2), else of its text."""
    return leaf(formats.commitment(text).encode() if scheme == SALTED else text.encode(), scheme)


def _ledger_leaf(e: dict[str, Any]) -> bytes:
    keys = ("head", "last_seq", "run_id", "seq")
    return leaf(canonical({k: e[k] for k in keys}))


def _v1_parts(e: dict[str, Any]) -> dict[str, Any]:
    """A converge.bundle/1 event (its whole message) as the parts /2 carries."""
    m = e["message"]
    p = json.loads(m)
    payload = m[m.index('"payload":') + len('"payload":') : m.rindex(',"run_id":')]
    ts = m[m.rindex(',"ts":') + len(',"ts":') : -1]
    return {"cycle": p["cycle"], "kind": p["kind"], "payload": payload, "ts": ts, "hash": e["hash"]}


def scan(bundle: dict[str, Any], run: dict[str, Any]) -> dict[str, Any]:
    """One pass over a run bundle's events: rebuild each message, hash its events-tree
    leaf and its chain link, keep the fact texts and the payloads a check reads."""
    events = bundle["events"]
    if bundle.get("format") == V1:
        events = [_v1_parts(e) for e in events]
    rid = json.dumps(run["run_id"], ensure_ascii=False)
    chain = str(run.get("chain"))
    v2, plain = chain.endswith("/2"), chain.removesuffix("/2") == "sha256"
    sha, quoted = hashlib.sha256, {}
    leaves, promoted, read, signed, hashes, marked = [], [], [], [], [], []
    bad, prev = None, GENESIS.encode()
    for seq, e in enumerate(events, 1):
        kind, payload = e["kind"], e["payload"]
        if kind not in quoted:
            quoted[kind] = json.dumps(kind, ensure_ascii=False)
        chained = formats.committed(kind, payload) if v2 and kind in FACT_KINDS else payload
        message = (
            f'{{"cycle":{e["cycle"]},"kind":{quoted[kind]},"payload":{chained},'
            f'"run_id":{rid},"seq":{seq},"ts":{e["ts"]}}}'
        ).encode()
        leaves.append(sha(b"\x00" + message).digest())
        if plain:
            digest = sha(prev + message).hexdigest()
            if bad is None and digest != e["hash"]:
                bad = seq
            prev = digest.encode()
        if kind == "fact_promoted":
            promoted.append(payload)
        elif kind in READ:
            read.append((kind, payload))  # parsed by the check that reads it
        elif kind in SIGNED and '"signature":' in payload:
            signed.append((seq, payload))
        hashes.append(e["hash"])
        if kind == formats.REDACTED or (v2 and kind in FACT_KINDS and formats.MARK in payload):
            marked.append((seq, kind, payload))  # what the redactions check reads
    return {
        "count": len(leaves),
        "root": tree_root(leaves),
        "bad": bad,
        "head": prev.decode(),
        "promoted": promoted,
        "read": read,
        "signed": signed,
        "hashes": hashes,
        "marked": marked,
    }


def checks(
    bundle: dict[str, Any],
    public_pem: bytes,
    witness: str | None = None,
    reasons: dict[str, str] | None = None,
) -> list[tuple[str, bool]]:
    """(name, ok) of every check, in the order docs/audit-format.md lists them;
    ``witness``: a verifier key whose cosignature the checkpoint must carry;
    ``reasons``, when given, gets why a check that says why failed (its name: why)."""
    out: list[tuple[str, bool]] = []

    def check(name: str, fn: Callable[[], bool | str]) -> None:
        try:
            found = fn()
        except (KeyError, TypeError, ValueError, IndexError, AttributeError):
            found = False
        if isinstance(found, str) and reasons is not None:
            reasons[name] = found  # a check that says why it failed
        out.append((name, bool(found) and not isinstance(found, str)))

    run, head = bundle.get("run") or {}, bundle.get("signed_head") or {}
    ledger: Any = bundle.get("ledger")
    scheme = run.get("facts_merkle", LEGACY)
    check(
        "format",
        lambda: (
            bundle.get("format") in (V3, V2, V1)
            and bundle.get("kind") in ("run", "fact")
            and str(run.get("chain")).endswith("/2") == (bundle["format"] == V3)
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
                fact_leaf(f["text"], scheme),
                f["index"],
                run["facts_count"],
                [bytes.fromhex(p) for p in f["proof"]],
                bytes.fromhex(run["facts_root"]),
                scheme,
            ),
        )
    else:
        try:
            s: Any = scan(bundle, run)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError):
            s = None  # every check that reads the events fails
        check(
            "events root",
            lambda: s["count"] == run["events_count"] and s["root"].hex() == run["events_root"],
        )
        check("event chain", lambda: _chain(s, run))
        check("facts", lambda: _facts(bundle, s, run))
        check("facts root", lambda: _facts_root(bundle, s, run, scheme))
        check("redactions", lambda: formats.redaction_problem(s["marked"]) or True)
        check("checkpoint", lambda: _checkpoint(bundle.get("checkpoint"), s))
        if bundle.get("deciders"):
            check("signed decisions", lambda: _decisions(bundle["deciders"], s, run["run_id"]))
    check(
        "ledger entry",
        lambda: (
            ledger["index"] == ledger["entry"]["seq"] - 1
            and all(ledger["entry"][k] == run[k] for k in ("run_id", "last_seq", "head"))
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
    if bundle.get("ledger_checkpoint") is not None or witness is not None:
        check("ledger checkpoint", lambda: formats.ledger_checkpoint(bundle, public_pem))
    if witness is not None:
        check(
            "witness cosignature",
            lambda: formats.cosigned(bundle["ledger_checkpoint"], formats.parse_vkey(witness)),
        )
    return out


def _chain(s: dict[str, Any], run: dict[str, Any]) -> bool:
    if s["bad"] is not None or s["count"] != run["last_seq"]:
        return False
    # an HMAC chain needs the secret key; the signed events root covers it
    return run["chain"].removesuffix("/2") != "sha256" or bool(s["head"] == run["head"])


def _decisions(deciders: dict[str, Any], s: dict[str, Any], run_id: str) -> bool:
    """Each signed decision: a converge.decision/1 statement by a recorded decider,
    equal to the recorded decision, signed at an earlier chain head, with the key
    the bundle carries for its signer (docs/audit-format.md)."""
    for seq, text in s["signed"]:
        payload = json.loads(text)
        st = payload["signature"]
        recorded = {**payload, "run_id": run_id}
        same = ("gate_id", "run_id", "approved", "reason", "value")
        deciders_named = {n.strip() for n in str(payload.get("by")).split(",")}
        pem = deciders.get(st.get("by"))
        if (
            st.get("type") != "converge.decision/1"
            or any(canonical(st.get(k)) != canonical(recorded.get(k)) for k in same)
            or st.get("by") not in deciders_named
            or st.get("head") not in s["hashes"][: seq - 1]
            or not isinstance(pem, str)
            or check_signature(pem.encode(), st) is not None
        ):
            return False
    return True


def _fact_texts(bundle: dict[str, Any], s: dict[str, Any]) -> list[str]:
    """The facts tree's leaf texts: the initial facts, then each fact_promoted payload
    (a /1 bundle lists them all in "facts")."""
    if bundle["format"] == V1:
        return list(bundle["facts"])
    return [*bundle["initial_facts"], *s["promoted"]]


def _facts(bundle: dict[str, Any], s: dict[str, Any], run: dict[str, Any]) -> bool:
    started = [json.loads(p) for kind, p in s["read"] if kind == "run_started"]
    if not started:
        return False
    expected = list(started[0].get("initial_facts", []))
    if bundle["format"] == V1:
        carried = bundle["facts"]
        expected += [json.loads(t) for t in s["promoted"]]
    else:
        carried = bundle["initial_facts"]
        link = started[0].get("forked_from")
        if not expected and isinstance(link, dict) and isinstance(link.get("facts"), dict):
            # a fork refers to its parent's facts up to the fork point: the bundle
            # carries them; their count and root are the ones its run_started chained
            scheme = run.get("facts_merkle", LEGACY)
            leaves = [fact_leaf(t, scheme) for t in carried]
            if len(carried) != link["facts"].get("count") or (
                tree_root(leaves, scheme).hex() != link.get("facts_root")
            ):
                return False
            expected = [json.loads(t) for t in carried]
    return (
        isinstance(carried, list)
        and len(carried) == len(expected)
        and all(json.loads(t) == f for t, f in zip(carried, expected, strict=True))
        and len(_fact_texts(bundle, s)) == run["facts_count"]
    )


def _facts_root(
    bundle: dict[str, Any], s: dict[str, Any], run: dict[str, Any], scheme: str
) -> bool:
    texts = _fact_texts(bundle, s)
    root = tree_root([fact_leaf(t, scheme) for t in texts], scheme).hex()
    stops = [json.loads(p) for kind, p in s["read"] if kind in ("run_stopped", "run_paused")]
    return (
        len(texts) == run["facts_count"]
        and root == run["facts_root"]
        and bool(stops[-1]["facts_root"] == root)
    )


def _checkpoint(blob: str | None, s: dict[str, Any]) -> bool:
    if blob is None:
        return True
    read = [json.loads(p) for kind, p in s["read"] if kind != "run_started"]
    saved = [p for p in read if "checkpoint_sha256" in p]
    return bool(saved) and formats.checkpoint_digest(blob) == saved[-1]["checkpoint_sha256"]


def read(path: str) -> dict[str, Any]:
    """The bundle in the file; ``ValueError`` saying in one line why it is none."""
    try:
        with open(path, "rb") as f:
            bundle = json.loads(f.read())
    except RecursionError:
        raise ValueError(f"{path} is not a JSON proof bundle: nested too deeply") from None
    except ValueError as exc:  # not UTF-8, not JSON, an integer past the digit limit
        why = " ".join(str(exc).split())
        raise ValueError(f"{path} is not a JSON proof bundle: {why}") from None
    if not isinstance(bundle, dict) or bundle.get("format") not in (V3, V2, V1):
        raise ValueError(f"{path} is not a proof bundle (format {V3!r}, {V2!r} or {V1!r})")
    spec = formats.SHAPES.get((bundle["format"], bundle.get("kind")))
    if spec is None:
        raise ValueError(f"{path} is not a proof bundle: kind is not 'run' or 'fact'")
    problem = formats.shape_problem(bundle, spec)
    if problem:
        raise ValueError(f"{path} is not a proof bundle: {problem}")
    return bundle


def main(argv: list[str]) -> int:
    """``verify_bundle.py FILE PUBLIC_KEY [--witness VKEY]``: 0 all checks pass, 1 one
    fails, 2 bad input (one line on stderr says why: the field, for a bundle of the
    wrong shape)."""
    if len(argv) not in (2, 4) or (len(argv) == 4 and argv[2] != "--witness"):
        print("usage: verify_bundle.py FILE PUBLIC_KEY [--witness VKEY]", file=sys.stderr)
        return 2
    witness = argv[3] if len(argv) == 4 else None
    try:
        bundle = read(argv[0])
        with open(argv[1], "rb") as f:
            public_pem = f.read()
        if witness is not None and "+" not in witness:  # a file holding the key
            with open(witness, encoding="utf-8") as f:
                witness = f.read()
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    reasons: dict[str, str] = {}
    results = checks(bundle, public_pem, witness, reasons)
    for name, ok in results:
        why = f": {reasons[name]}" if name in reasons else ""
        print(f"{'ok' if ok else 'FAILED'} {name}{why}")
    return 0 if all(ok for _, ok in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
