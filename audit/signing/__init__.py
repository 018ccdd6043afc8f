"""Ed25519 signatures (docs/audit-format.md): over the store's statements
(``_statements``), the people a store knows with their public keys
(``_known_people``), a person's signature over their decision on a gate
(``_decisions``), and signed notes, verifier keys and cosignatures in the C2SP
formats (``_notes``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from audit.lazy import face

if TYPE_CHECKING:
    from audit.signing._decisions import (
        DECISION_TYPE,
        chain_holds,
        decision_statement,
        statement_problem,
    )
    from audit.signing._known_people import (
        Person,
        add_person,
        anyone_registered,
        public_key_from_pem,
    )
    from audit.signing._notes import (
        COSIGNATURE,
        ED25519,
        Note,
        VerifierKey,
        cosign,
        cosigned_at,
        parse_note,
        parse_vkey,
        sign_note,
        signed_by,
        verifier_key,
        write_vkey,
    )
    from audit.signing._statements import (
        SIGNING_KEY_ENV,
        Signer,
        SigningKeyError,
        canonical,
        generate_keys,
        load_public_key,
        load_signer,
        signer_from_env,
    )

__all__ = [
    "COSIGNATURE",
    "DECISION_TYPE",
    "ED25519",
    "SIGNING_KEY_ENV",
    "Note",
    "Person",
    "Signer",
    "SigningKeyError",
    "VerifierKey",
    "add_person",
    "anyone_registered",
    "canonical",
    "chain_holds",
    "cosign",
    "cosigned_at",
    "decision_statement",
    "generate_keys",
    "load_public_key",
    "load_signer",
    "parse_note",
    "parse_vkey",
    "public_key_from_pem",
    "sign_note",
    "signed_by",
    "signer_from_env",
    "statement_problem",
    "verifier_key",
    "write_vkey",
]

if not TYPE_CHECKING:
    __getattr__ = face(
        __name__,
        __all__,
        (
            "_decisions",
            "_known_people",
            "_notes",
            "_statements",
        ),
    )
