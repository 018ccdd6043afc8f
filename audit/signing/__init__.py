"""Ed25519 signatures (docs/audit-format.md): over the store's statements
(``_statements``), the people a store knows with their public keys
(``_known_people``), and a person's signature over their decision on a gate
(``_decisions``).
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
    "DECISION_TYPE",
    "SIGNING_KEY_ENV",
    "Person",
    "Signer",
    "SigningKeyError",
    "add_person",
    "anyone_registered",
    "canonical",
    "chain_holds",
    "decision_statement",
    "generate_keys",
    "load_public_key",
    "load_signer",
    "public_key_from_pem",
    "signer_from_env",
    "statement_problem",
]

if not TYPE_CHECKING:
    __getattr__ = face(
        __name__,
        __all__,
        (
            "_decisions",
            "_known_people",
            "_statements",
        ),
    )
