"""Proof bundles: one run's evidence, or one fact's, in a self-contained file
(``_bundles``), and their offline verification with the public key alone
(``_bundle_check``; docs/audit-format.md).
"""

from __future__ import annotations

from audit.proofs._bundle_check import read_bundle, verify_bundle
from audit.proofs._bundles import export_fact, export_run, write_bundle

__all__ = [
    "export_fact",
    "export_run",
    "read_bundle",
    "verify_bundle",
    "write_bundle",
]
