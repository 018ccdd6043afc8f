"""A witness: it cosigns a log's checkpoint (c2sp.org/tlog-cosignature) only after
checking that it extends the last checkpoint it cosigned (docs/audit-format.md).

The witness keeps no database: its state is the last checkpoint it cosigned, a
note carrying its own cosignature (so a state file swapped for another is refused).
Before cosigning it checks the log's signature with the log's verifier key, the
origin, and the RFC 9162 consistency proof from the previous size to the new one.
The first checkpoint a witness sees is cosigned as it is (trust on first use).
"""

from __future__ import annotations

from audit.ledger._checkpoint import consistent, parse_checkpoint
from audit.signing import (
    COSIGNATURE,
    Note,
    Signer,
    VerifierKey,
    cosign,
    cosigned_at,
    signed_by,
    verifier_key,
)
from engine.errors import CheckpointError, WitnessRefused

__all__ = ["cosign_checkpoint", "cosigned_by"]


def cosign_checkpoint(
    checkpoint: str,
    previous: str | None,
    proof: list[bytes],
    witness: Signer,
    log: VerifierKey,
    when: int,
) -> Note:
    """``checkpoint`` (a note's text) with ``witness``'s cosignature at POSIX time
    ``when``, once it is signed by ``log`` and ``proof`` shows it extends
    ``previous`` (the last checkpoint this witness cosigned; None the first time).

    Raises ``CheckpointError`` for text that is no checkpoint, ``WitnessRefused``
    naming what does not hold (the log's signature, the previous checkpoint's
    cosignature by this witness, the origin, the consistency proof).
    """
    new, note = parse_checkpoint(checkpoint)
    why = signed_by(note, log)
    if why is not None:
        raise WitnessRefused(f"the checkpoint is not the log's: {why}")
    if previous is not None:
        old, old_note = parse_checkpoint(previous)
        mine = verifier_key(witness.public, COSIGNATURE)
        try:
            cosigned_at(old_note, mine)
        except CheckpointError as exc:
            raise WitnessRefused(f"the previous checkpoint: {exc}") from exc
        why = consistent(old, new, proof)
        if why is not None:
            raise WitnessRefused(f"not consistent with the checkpoint cosigned before: {why}")
    return cosign(note, witness, when)


def cosigned_by(text: str, witness: Signer) -> bool:
    """Whether ``text`` is a checkpoint ``witness`` cosigned: a witness's state (its
    last checkpoint cosigned), found where a ``--previous`` was expected."""
    try:
        _, note = parse_checkpoint(text)
        cosigned_at(note, verifier_key(witness.public, COSIGNATURE))
    except CheckpointError:
        return False
    return True
