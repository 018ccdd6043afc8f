"""Signed notes, verifier keys and witness cosignatures in the C2SP formats
(c2sp.org/signed-note, c2sp.org/tlog-cosignature; docs/audit-format.md).

A note is a text ending in a newline, a blank line, then one line per signature:
``— NAME base64(4-byte key hash ‖ signature)``. The key hash is the first four
bytes of ``sha256(NAME ‖ 0x0A ‖ type ‖ 32-byte Ed25519 public key)``, the type
``0x01`` for a signature of the note's text (the log's), ``0x04`` for a witness's
cosignature, whose signature is ``8-byte big-endian time ‖ Ed25519 signature`` of
``"cosignature/v1\\ntime T\\n"`` followed by the note's text. A verifier key is
``NAME+hex(key hash)+base64(type ‖ public key)``.

A key's name is fixed by the key itself (``converge/KEY_ID`` for the key that signs
checkpoints, ``converge-witness/KEY_ID`` for a witness's, KEY_ID as
:func:`audit.signing._statements.key_id`), so that a PEM key alone says how it signs.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from audit.signing._statements import Signer, key_id
from engine.errors import CheckpointError, SigningKeyError

if TYPE_CHECKING:  # cryptography is imported where a key is used
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

__all__ = [
    "COSIGNATURE",
    "ED25519",
    "Note",
    "NoteSignature",
    "VerifierKey",
    "cosign",
    "cosigned_at",
    "parse_note",
    "parse_vkey",
    "sign_note",
    "signed_by",
    "verifier_key",
    "write_vkey",
]

ED25519 = 0x01
"""The signature type of an Ed25519 signature over a note's text."""

COSIGNATURE = 0x04
"""The signature type of a timestamped Ed25519 checkpoint cosignature (cosignature/v1)."""

_DASH = "\u2014 "
_NAMES = {ED25519: "converge", COSIGNATURE: "converge-witness"}


def _raw(public: Ed25519PublicKey) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def _key_hash(name: str, kind: int, raw: bytes) -> bytes:
    return hashlib.sha256(name.encode() + b"\n" + bytes([kind]) + raw).digest()[:4]


@dataclass(frozen=True, slots=True)
class VerifierKey:
    """A verifier key: its ``name``, signature ``kind`` (:data:`ED25519` or
    :data:`COSIGNATURE`), Ed25519 ``public`` key and 4-byte ``key_hash``."""

    name: str
    kind: int
    public: Ed25519PublicKey
    key_hash: bytes

    def text(self) -> str:
        """``NAME+hex(key hash)+base64(type ‖ public key)``."""
        material = base64.b64encode(bytes([self.kind]) + _raw(self.public)).decode()
        return f"{self.name}+{self.key_hash.hex()}+{material}"


def verifier_key(public: Ed25519PublicKey, kind: int = ED25519) -> VerifierKey:
    """The verifier key of ``public`` for signatures of ``kind``, named after the key."""
    name = f"{_NAMES[kind]}/{key_id(public)}"
    return VerifierKey(name, kind, public, _key_hash(name, kind, _raw(public)))


VKEY_FILE = "converge.vkey"


def write_vkey(directory: Path, public: Ed25519PublicKey, kind: int = ED25519) -> Path:
    """Write ``public``'s verifier key for ``kind`` to ``directory/converge.vkey`` (one
    line); ``SigningKeyError`` when the file exists, ``OSError`` when it cannot be written."""
    path = directory / VKEY_FILE
    if path.exists():
        raise SigningKeyError(f"{path} exists already: a key is never overwritten")
    path.write_text(verifier_key(public, kind).text() + "\n", encoding="utf-8")
    return path


def parse_vkey(text: str) -> VerifierKey:
    """A verifier key ``NAME+HASH+BASE64`` (type 0x01 or 0x04, Ed25519) → :class:`VerifierKey`.

    Raises ``CheckpointError`` saying what is wrong (its hash not the key's included).
    """
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    parts = text.strip().split("+", 2)  # base64 has '+' too
    if len(parts) != 3 or not parts[0] or any(c.isspace() for c in parts[0]):
        raise CheckpointError("not a verifier key (NAME+HASH+BASE64, c2sp.org/signed-note)")
    name, hash_hex, material = parts
    try:
        key = base64.b64decode(material, validate=True)
        declared = bytes.fromhex(hash_hex)
    except (binascii.Error, ValueError) as exc:
        raise CheckpointError(f"verifier key {name}: {exc}") from exc
    if len(key) != 33 or key[0] not in _NAMES:
        raise CheckpointError(f"verifier key {name}: not an Ed25519 key of type 0x01 or 0x04")
    if len(declared) != 4 or declared != _key_hash(name, key[0], key[1:]):
        raise CheckpointError(f"verifier key {name}: its key hash is not the key's")
    return VerifierKey(name, key[0], Ed25519PublicKey.from_public_bytes(key[1:]), declared)


@dataclass(frozen=True, slots=True)
class NoteSignature:
    """One signature line: the key's ``name``, its 4-byte ``key_hash``, the ``signature``."""

    name: str
    key_hash: bytes
    signature: bytes

    def line(self) -> str:
        """``— NAME base64(key hash ‖ signature)`` and its newline."""
        return f"{_DASH}{self.name} {base64.b64encode(self.key_hash + self.signature).decode()}\n"


@dataclass(frozen=True, slots=True)
class Note:
    """A signed note: its ``text`` (ending in a newline) and its signature lines."""

    text: str
    signatures: tuple[NoteSignature, ...]

    def render(self) -> str:
        """The note as written: the text, a blank line, one line per signature."""
        return self.text + "\n" + "".join(s.line() for s in self.signatures)

    def with_signature(self, added: NoteSignature) -> Note:
        """This note with ``added``, replacing a signature by the same key."""
        kept = tuple(
            s for s in self.signatures if (s.name, s.key_hash) != (added.name, added.key_hash)
        )
        return Note(self.text, (*kept, added))


def parse_note(data: str) -> Note:
    """A signed note's text → :class:`Note`; ``CheckpointError`` for text that is
    none (a control character, no blank line before the signatures, a bad line)."""
    if any(c < " " and c != "\n" for c in data):
        raise CheckpointError("not a signed note: a control character other than newline")
    split = data.rfind("\n\n")
    if split < 0 or not data.endswith("\n") or split + 2 == len(data):
        raise CheckpointError("not a signed note: no signature lines after a blank line")
    text, lines = data[: split + 1], data[split + 2 : -1].split("\n")
    signatures = []
    for line in lines:
        name, _, b64 = line.removeprefix(_DASH).partition(" ")
        try:
            raw = base64.b64decode(b64, validate=True)
        except binascii.Error:
            raw = b""
        if not line.startswith(_DASH) or not name or "+" in name or len(raw) < 5:
            raise CheckpointError(f"not a signed note: bad signature line {line[:60]!r}")
        signatures.append(NoteSignature(name, raw[:4], raw[4:]))
    return Note(text, tuple(signatures))


def _find(note: Note, vkey: VerifierKey) -> NoteSignature | None:
    return next(
        (s for s in note.signatures if (s.name, s.key_hash) == (vkey.name, vkey.key_hash)), None
    )


def sign_note(text: str, signer: Signer) -> Note:
    """``text`` (lines ending in a newline) signed by ``signer`` under its verifier key's name."""
    vkey = verifier_key(signer.public)
    return Note(text, (NoteSignature(vkey.name, vkey.key_hash, signer.sign_bytes(text.encode())),))


def signed_by(note: Note, vkey: VerifierKey) -> str | None:
    """Why ``note`` carries no valid signature of ``vkey`` (type 0x01), or None when it does."""
    from cryptography.exceptions import InvalidSignature

    found = _find(note, vkey)
    if found is None:
        return f"no signature by {vkey.name}"
    try:
        vkey.public.verify(found.signature, note.text.encode())
    except InvalidSignature:
        return f"the signature by {vkey.name} does not verify"
    return None


def _cosigned_message(text: str, when: int) -> bytes:
    return f"cosignature/v1\ntime {when}\n{text}".encode()


def cosign(note: Note, signer: Signer, when: int) -> Note:
    """``note`` with the cosignature/v1 of ``signer`` at POSIX time ``when`` (seconds)."""
    vkey = verifier_key(signer.public, COSIGNATURE)
    signature = when.to_bytes(8, "big") + signer.sign_bytes(_cosigned_message(note.text, when))
    return note.with_signature(NoteSignature(vkey.name, vkey.key_hash, signature))


def cosigned_at(note: Note, vkey: VerifierKey) -> int:
    """The time (POSIX seconds) of the valid cosignature of ``vkey`` (type 0x04) on ``note``.

    Raises ``CheckpointError`` when there is none or it does not verify.
    """
    from cryptography.exceptions import InvalidSignature

    found = _find(note, vkey)
    if vkey.kind != COSIGNATURE:
        raise CheckpointError(f"{vkey.name} is not a witness's verifier key (type 0x04)")
    if found is None:
        raise CheckpointError(f"no cosignature by witness {vkey.name}")
    when = int.from_bytes(found.signature[:8], "big")
    try:
        if len(found.signature) != 72 or when >= 1 << 63:
            raise InvalidSignature
        vkey.public.verify(found.signature[8:], _cosigned_message(note.text, when))
    except InvalidSignature:
        raise CheckpointError(f"the cosignature by witness {vkey.name} does not verify") from None
    return when
