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
        SIGNATURE_FIELD,
        SIGNED_KINDS,
        chain_holds,
        check_run_signatures,
        check_signed_events,
        decision_statement,
        signed_deciders,
        statement_problem,
        verify_bundle_decisions,
    )
    from audit.signing._known_people import (
        Person,
        add_person,
        anyone_in,
        anyone_registered,
        ensure_people_table,
        people,
        person,
        person_in,
        public_key_from_pem,
        public_keys,
        ready_to_read,
    )
    from audit.signing._statements import (
        KEY_FILE,
        PUB_FILE,
        SIGNING_KEY_ENV,
        Signer,
        SigningKeyError,
        canonical,
        check_signature,
        generate_keys,
        key_id,
        load_public_key,
        load_signer,
        signer_from_env,
    )

__all__ = [
    "DECISION_TYPE",
    "KEY_FILE",
    "PUB_FILE",
    "SIGNATURE_FIELD",
    "SIGNED_KINDS",
    "SIGNING_KEY_ENV",
    "Person",
    "Signer",
    "SigningKeyError",
    "add_person",
    "anyone_in",
    "anyone_registered",
    "canonical",
    "chain_holds",
    "check_run_signatures",
    "check_signature",
    "check_signed_events",
    "decision_statement",
    "ensure_people_table",
    "generate_keys",
    "key_id",
    "load_public_key",
    "load_signer",
    "people",
    "person",
    "person_in",
    "public_key_from_pem",
    "public_keys",
    "ready_to_read",
    "signed_deciders",
    "signer_from_env",
    "statement_problem",
    "verify_bundle_decisions",
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
