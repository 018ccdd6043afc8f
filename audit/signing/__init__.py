"""Ed25519 signatures (docs/audit-format.md): over the store's statements
(``_statements``), the people a store knows with their public keys
(``_known_people``), a person's signature over their decision on a gate
(``_decisions``), and signed notes, verifier keys and cosignatures in the C2SP
formats (``_notes``).
"""

from __future__ import annotations

from audit.signing._decisions import (
    DECISION_TYPE,
    SIGNED_KINDS,
    chain_holds,
    check_run_signatures,
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
    person,
    person_in,
    public_key_from_pem,
    ready_to_read,
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
    check_signature,
    ensure_signature_tables,
    generate_keys,
    keep_statement,
    load_public_key,
    load_signer,
    sign_facts_root,
    signer_from_env,
    stored_statement,
    stored_statements,
)

__all__ = [
    "COSIGNATURE",
    "DECISION_TYPE",
    "ED25519",
    "SIGNED_KINDS",
    "SIGNING_KEY_ENV",
    "Note",
    "Person",
    "Signer",
    "SigningKeyError",
    "VerifierKey",
    "add_person",
    "anyone_in",
    "anyone_registered",
    "canonical",
    "chain_holds",
    "check_run_signatures",
    "check_signature",
    "cosign",
    "cosigned_at",
    "decision_statement",
    "ensure_signature_tables",
    "generate_keys",
    "keep_statement",
    "load_public_key",
    "load_signer",
    "parse_note",
    "parse_vkey",
    "person",
    "person_in",
    "public_key_from_pem",
    "ready_to_read",
    "sign_facts_root",
    "sign_note",
    "signed_by",
    "signed_deciders",
    "signer_from_env",
    "statement_problem",
    "stored_statement",
    "stored_statements",
    "verifier_key",
    "verify_bundle_decisions",
    "write_vkey",
]
