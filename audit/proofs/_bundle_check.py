"""Verifying a proof bundle offline, with the public key alone (docs/audit-format.md).

No database: :func:`verify_bundle` reads the bundle's JSON and says, check by
check, what it verified — the signatures, the events' chain and root, the facts
against the events and their root, the redacted facts against their
``fact_redacted`` events (as the store's verify), the checkpoint, the ledger entry and its
inclusion in the signed head — or, for a one-fact bundle, the fact's audit path
to the signed facts root; the checkpoint note (C2SP) of the signed head, and a
witness's cosignature on it when asked. Every check runs, so that a tampered bundle names each
part that does not fit.

The events are read in one pass (:func:`_scan`): each event's chained message is
rebuilt from its parts and hashed twice (its events-tree leaf, its chain link),
and only the payloads a check reads (``run_started``, the stops, the checkpoints)
are parsed; a fact's leaf hashes its ``fact_promoted`` payload text as carried.
A ``converge.bundle/1`` bundle (whole messages, the facts listed again) goes
through the same checks.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from audit.cells import loads as _loads
from audit.ledger import HEAD_TYPE, parse_checkpoint
from audit.proofs._bundle_shape import shape_problem
from audit.proofs._bundles import FORMAT, FORMAT_V1, FORMAT_V3, RUN_TYPE, fact_leaves
from audit.signing import (
    VerifierKey,
    check_signature,
    cosigned_at,
    signed_by,
    verifier_key,
    verify_bundle_decisions,
)
from audit.trail import CHECKPOINTED, MARK, REDACTED, TERMINAL, ChainRow, check_redactions
from engine.errors import BundleError, CheckpointError
from engine.hashing.chain import GENESIS, PLAIN
from engine.hashing.commitment import chain_parts, chained_payload, checkpoint_sha256
from engine.hashing.ledger import entry_message
from engine.hashing.merkle import leaf_hash, merkle_scheme
from engine.hashing.proofs import MerkleTree, verify_inclusion

if TYPE_CHECKING:  # cryptography is imported where a key is used
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

FORMATS = (FORMAT_V3, FORMAT, FORMAT_V1)
"""The bundle formats read."""

READ = ("run_started", REDACTED, *CHECKPOINTED)
"""The events whose payload a check reads (the others are only hashed)."""

_MARKED = ("run_started", REDACTED)
"""The read events the redactions check looks at."""

_quote: Callable[[str], str] = json.encoder.encode_basestring


@dataclass(frozen=True, slots=True)
class Check:
    """One check of a bundle: its name, whether it passed, what it found."""

    name: str
    ok: bool
    detail: str

    def to_dict(self) -> dict[str, Any]:
        """``{"name", "ok", "detail"}``."""
        return asdict(self)


def read_bundle(path: Path) -> dict[str, Any]:
    """The bundle at ``path``, of the layout docs/audit-format.md gives.

    Raises ``BundleError`` naming the file and, for a field missing or of the wrong
    type, its path (``events[3].cycle``): a file that cannot be read, that is not
    UTF-8 JSON (empty, cut short, nested too deeply, an integer of over 4300
    digits), or not a bundle of format ``converge.bundle/2`` or ``/1``.
    """
    try:
        data = _loads(path.read_bytes())
    except OSError as exc:
        raise BundleError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, the digit limit
        raise BundleError(f"{path} is not a JSON proof bundle: {_one_line(exc)}") from exc
    if not isinstance(data, dict) or data.get("format") not in FORMATS:
        raise BundleError(f"{path} is not a proof bundle (format {FORMAT!r} or {FORMAT_V1!r})")
    problem = shape_problem(data, first_layout=data["format"] == FORMAT_V1)
    if problem is not None:
        raise BundleError(f"{path} is not a proof bundle: {problem}")
    return data


def _one_line(exc: Exception) -> str:
    """``exc``'s message on one line (the digit limit's spans two)."""
    return " ".join(str(exc).split())


def _hex(value: Any) -> bytes:
    if not isinstance(value, str) or len(value) != 64:
        raise ValueError(f"{value!r} is not a 64-digit hex hash")
    return bytes.fromhex(value)


@dataclass(slots=True)
class _Scan:
    """A run bundle's events, read once."""

    count: int
    leaves: list[bytes]
    """Each event's leaf in the events tree."""
    first_bad: tuple[int, str] | None
    """(seq, kind) of the first event whose hash does not chain (sha256 chains)."""
    head: str | None
    """The recomputed chain's last hash (sha256 chains)."""
    promoted: list[tuple[int, str]]
    """(seq, payload text) of each ``fact_promoted`` event."""
    read: list[tuple[int, str, str]]
    """(seq, kind, payload text) of each event of a kind in :data:`READ`."""
    _parsed: dict[int, Any] = field(default_factory=dict)

    def payloads(self, kinds: tuple[str, ...]) -> list[tuple[int, Any]]:
        """(seq, parsed payload) of the read events of ``kinds``, in order."""
        out = []
        for seq, kind, text in self.read:
            if kind in kinds:
                if seq not in self._parsed:
                    self._parsed[seq] = _loads(text)
                out.append((seq, self._parsed[seq]))
        return out


def _v1_parts(event: dict[str, Any]) -> dict[str, Any]:
    """A ``converge.bundle/1`` event (its whole message) as the parts ``/2`` carries;
    a message that is not canonical then fails the events root."""
    message = event["message"]
    parsed = _loads(message)
    return {
        "cycle": parsed["cycle"],
        "kind": parsed["kind"],
        "payload": message[message.index('"payload":') + 10 : message.rindex(',"run_id":')],
        "ts": message[message.rindex(',"ts":') + 6 : -1],
        "hash": event["hash"],
    }


def _scan(bundle: dict[str, Any], run: dict[str, Any]) -> _Scan:
    """One pass over the events: rebuild each message (docs/audit-format.md), hash
    its leaf and its chain link, keep the fact texts and the payloads to read."""
    events = bundle["events"]
    if bundle.get("format") == FORMAT_V1:
        events = [_v1_parts(e) for e in events]
    rid = _quote(run["run_id"])
    chain, committed = chain_parts(str(run.get("chain")))
    plain = chain == PLAIN
    sha = hashlib.sha256
    quoted: dict[str, str] = {}
    leaves: list[bytes] = []
    promoted: list[tuple[int, str]] = []
    read: list[tuple[int, str, str]] = []
    bad: tuple[int, str] | None = None
    prev = GENESIS.encode()
    for seq, e in enumerate(events, 1):
        kind, payload = e["kind"], e["payload"]
        chained = payload
        if committed and kind in ("fact_promoted", "run_started"):
            chained = chained_payload(kind, payload)  # format 2: facts by their commitments
        q = quoted.get(kind) or quoted.setdefault(kind, _quote(kind))
        # engine.hashing.chain.event_message (the timestamp's text as carried); its
        # leaf_hash and its plain chain link inlined: one pass over 100k events
        message = (
            f'{{"cycle":{e["cycle"]},"kind":{q},"payload":{chained},'
            f'"run_id":{rid},"seq":{seq},"ts":{e["ts"]}}}'
        ).encode()
        leaves.append(sha(b"\x00" + message).digest())
        if plain:
            digest = sha(prev + message).hexdigest()
            if bad is None and digest != e["hash"]:
                bad = (seq, kind)
            prev = digest.encode()
        if kind == "fact_promoted":
            promoted.append((seq, payload))
        elif kind in READ:
            read.append((seq, kind, payload))
    head = prev.decode() if plain else None
    return _Scan(len(leaves), leaves, bad, head, promoted, read)


def verify_bundle(
    bundle: dict[str, Any], public: Ed25519PublicKey, witness: VerifierKey | None = None
) -> list[Check]:
    """Every check of ``bundle`` (a run or a one-fact bundle), in order; with a
    ``witness`` (its verifier key, type 0x04), also that witness's cosignature on
    the bundle's checkpoint."""
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
        scanned: list[_Scan | Exception] = []

        def scan() -> _Scan:
            if not scanned:
                try:
                    scanned.append(_scan(bundle, run))
                except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
                    scanned.append(exc)
            found = scanned[0]
            if isinstance(found, Exception):
                raise found  # each check that reads the events names it
            return found

        check("events root", lambda: _events_root(scan(), run))
        check("event chain", lambda: _chain(scan(), run))
        check("facts", lambda: _facts(scan(), bundle, run))
        check("facts root", lambda: _facts_root(scan(), bundle, run))
        check("redactions", lambda: _redactions(scan(), run))
        check("checkpoint", lambda: _checkpoint(bundle.get("checkpoint"), scan()))
        if bundle.get("deciders"):  # signed decisions, with the deciders' public keys
            check("signed decisions", lambda: verify_bundle_decisions(bundle, run["run_id"]))
    check("ledger entry", lambda: _entry(bundle["ledger"], run))
    check("ledger inclusion", lambda: _inclusion(bundle["ledger"], head))
    note = bundle.get("ledger_checkpoint")
    if note is not None or witness is not None:
        check("ledger checkpoint", lambda: _ledger_checkpoint(note, head, public))
    if witness is not None:
        check("witness cosignature", lambda: _cosigned(note, witness))
    return checks


def _ledger_checkpoint(
    text: str | None, head: dict[str, Any], public: Ed25519PublicKey
) -> str | tuple[bool, str]:
    if text is None:
        return False, "no checkpoint note (a bundle written before them)"
    try:
        checkpoint, note = parse_checkpoint(text)
    except CheckpointError as exc:
        return False, str(exc)
    why = signed_by(note, verifier_key(public))
    if why is not None:
        return False, why
    if (checkpoint.size, checkpoint.root.hex()) != (head["size"], head["root"]):
        return False, "the checkpoint's size and root are not the signed head's"
    return f"{checkpoint.origin} at size {checkpoint.size}, signed (C2SP tlog-checkpoint)"


def _cosigned(text: str | None, witness: VerifierKey) -> str | tuple[bool, str]:
    if text is None:
        return False, "no checkpoint note to be cosigned"
    try:
        when = cosigned_at(parse_checkpoint(text)[1], witness)
    except CheckpointError as exc:
        return False, str(exc)
    return f"cosigned by {witness.name} at {when} (C2SP tlog-cosignature)"


def _format(bundle: dict[str, Any]) -> str | tuple[bool, str]:
    if bundle.get("format") not in FORMATS or bundle.get("kind") not in ("run", "fact"):
        return False, f"not a {FORMAT_V3} (or {FORMAT}, {FORMAT_V1}) run or fact bundle"
    chain = str((bundle.get("run") or {}).get("chain"))
    if chain_parts(chain)[1] != (bundle["format"] == FORMAT_V3):
        return False, f"a {bundle['format']} bundle of a run whose chain is {chain}"
    return f"{bundle['format']}, kind {bundle['kind']}"


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


def _events_root(scan: _Scan, run: dict[str, Any]) -> str | tuple[bool, str]:
    if scan.count != run["events_count"]:
        return False, f"{scan.count} events, the run statement says {run['events_count']}"
    if MerkleTree(scan.leaves).root() != _hex(run["events_root"]):
        return False, "the events' RFC 6962 root differs from the signed run statement's"
    return f"{scan.count} events hash to the signed events root"


def _chain(scan: _Scan, run: dict[str, Any]) -> str | tuple[bool, str]:
    count, last = scan.count, run["last_seq"]
    if scan.first_bad is not None:
        seq, kind = scan.first_bad
        if count != last:
            return False, (
                f"{count} events, the run's chain has {last}: "
                f"one removed or added at or before event seq {seq} ({kind})"
            )
        return False, f"event seq {seq} ({kind}) changed (its hash does not chain)"
    if count != last:
        return False, f"{count} events, the run's chain has {last}"
    if chain_parts(run["chain"])[0] != PLAIN:
        return (
            f"{scan.count} events in order; their {run['chain']} chain needs the secret "
            "key (the signed events root covers them)"
        )
    if scan.head != run["head"]:
        return False, "the chain's last hash is not the run statement's head"
    return f"{scan.count} events chained (sha256) to head {run['head'][:16]}…"


def _fact_texts(scan: _Scan, bundle: dict[str, Any]) -> list[str]:
    """The facts tree's leaf texts: the initial facts, then each fact_promoted
    payload (a ``/1`` bundle lists them all in ``facts``)."""
    if bundle.get("format") == FORMAT_V1:
        return list(bundle["facts"])
    return [*bundle["initial_facts"], *(text for _seq, text in scan.promoted)]


def _facts(scan: _Scan, bundle: dict[str, Any], run: dict[str, Any]) -> str | tuple[bool, str]:
    started = scan.payloads(("run_started",))
    if not started:
        return False, "no run_started event: the initial facts are unknown"
    seq0, payload = started[0]
    initial = [(seq0, f) for f in payload.get("initial_facts", ())]
    if bundle.get("format") == FORMAT_V1:  # every fact listed: compare them all
        label, carried = "fact", bundle["facts"]
        expected = initial + [(seq, _loads(text)) for seq, text in scan.promoted]
    else:
        label, carried, expected = "initial fact", bundle["initial_facts"], initial
    if not isinstance(carried, list):
        raise TypeError(f"the {label}s are not a list")
    if label == "initial fact" and not initial and _taken(payload) is not None:
        # a fork refers to its parent's facts: the bundle carries them, checked
        # against the count and root its chained run_started recorded
        why = _taken_problem(payload, carried, run)
        if why is not None:
            return False, why
        expected = [(seq0, _loads(text)) for text in carried]
    first = next(
        (
            (i, seq)
            for i, (text, (seq, fact)) in enumerate(zip(carried, expected, strict=False))
            if _loads(text) != fact
        ),
        None,
    )
    counts = f"{len(carried)} {label}s, the events record {len(expected)}"
    at = "" if first is None else f" (from {label} {first[0]}, event seq {first[1]})"
    if len(carried) < len(expected):
        return False, f"{label} removed: {counts}{at}"
    if len(carried) > len(expected):
        return False, f"{label} added: {counts}{at}"
    if first is not None:
        return False, f"{label} {first[0]} differs from the one event seq {first[1]} records"
    total, signed = len(_fact_texts(scan, bundle)), run["facts_count"]
    if total != signed:
        word = "removed" if total < signed else "added"
        return False, f"fact {word}: the events hold {total} facts, the run statement says {signed}"
    return f"{total} facts ({len(initial)} initial), each the one its event records"


def _taken(started: dict[str, Any]) -> dict[str, Any] | None:
    """A fork's ``forked_from`` when it refers to its parent's facts (None if not)."""
    link = started.get("forked_from")
    if isinstance(link, dict) and isinstance(link.get("facts"), dict):
        return link
    return None


def _taken_problem(started: dict[str, Any], carried: list[Any], run: dict[str, Any]) -> str | None:
    """Why the facts a fork's bundle carries are not those its ``forked_from``
    refers to (their count and Merkle root under the run's scheme); None: they are."""
    link = _taken(started)
    assert link is not None
    count = link["facts"].get("count")
    if len(carried) != count:
        word = "removed" if len(carried) < count else "added"
        return f"fact taken from the parent {word}: {len(carried)} carried, the fork took {count}"
    scheme = merkle_scheme(run.get("facts_merkle"))
    root = MerkleTree(fact_leaves(carried, scheme), scheme).root().hex()
    if root != link.get("facts_root"):
        return (
            f"the facts taken from parent run {link.get('run')} differ from those it forked "
            f"from: their root {root[:16]}… is not forked_from.facts_root"
        )
    return None


def _facts_root(scan: _Scan, bundle: dict[str, Any], run: dict[str, Any]) -> str | tuple[bool, str]:
    texts = _fact_texts(scan, bundle)
    scheme = merkle_scheme(run.get("facts_merkle"))
    root = MerkleTree(fact_leaves(texts, scheme), scheme).root().hex()
    stops = scan.payloads(TERMINAL)
    recorded = stops[-1][1].get("facts_root") if stops else None
    if len(texts) != run["facts_count"]:
        return False, f"{len(texts)} facts, the run statement says {run['facts_count']}"
    if root != run["facts_root"]:
        return False, f"the facts' {scheme} root {root[:16]}… is not the signed facts root"
    if recorded != root:
        return False, "the facts root the run's last stop recorded differs"
    return f"recomputed from {len(texts)} facts ({scheme}): {root[:16]}…"


def _redactions(scan: _Scan, run: dict[str, Any]) -> str | tuple[bool, str]:
    """Each redacted fact against its ``fact_redacted`` event, as the store's verify
    ties them (:func:`audit.trail.check_redactions`): the chain hashes a format-2
    fact by its commitment alone, so a marker edited or a fact blanked by hand
    would pass every other check."""
    # only the texts that may take part become rows (100k facts: 0.05 s, not 0.7 s)
    rows = [ChainRow(s, k, 0, 0.0, text, "") for s, k, text in scan.read if k in _MARKED]
    rows += [ChainRow(s, "fact_promoted", 0, 0.0, t, "") for s, t in scan.promoted if MARK in t]
    rows.sort()  # by seq: the first disagreement is the one verify names
    problem = check_redactions(rows, chain_parts(str(run.get("chain")))[1])
    if problem is not None:
        return False, f"event seq {problem[0]}: {problem[1]}"
    n = sum(1 for r in rows if r.kind == REDACTED)
    return f"{n} redacted facts, each its fact_redacted event's" if n else "no fact redacted"


def _checkpoint(blob: str | None, scan: _Scan) -> str | tuple[bool, str]:
    if blob is None:
        return "none kept (the stop is final)"
    saved = [(seq, p) for seq, p in scan.payloads(CHECKPOINTED) if "checkpoint_sha256" in p]
    if not saved:
        return False, "a checkpoint no event records"
    seq, payload = saved[-1]
    if checkpoint_sha256(blob) != payload["checkpoint_sha256"]:
        return False, f"the checkpoint differs from the sha256 event seq {seq} records"
    return f"its sha256 is the one event seq {seq} records"


def _fact(fact: dict[str, Any], run: dict[str, Any]) -> str | tuple[bool, str]:
    scheme = merkle_scheme(run.get("facts_merkle"))
    leaf = fact_leaves([fact["text"]], scheme)[0]
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
