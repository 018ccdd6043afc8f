"""P1: the cost of a proof bundle (issue 26): ``converge export RUN --proof FILE`` and
``converge verify-bundle FILE`` of a run of 100,000 facts (target: each <= 2 s).

The run is recorded once in a SQLite store (one suggestor promoting every fact in
one cycle), with a signing key; then the export (read and re-check the chain,
compute the events', facts' and ledger's RFC 6962 trees, sign, write the JSON file)
and the offline verification (read the file, every check) are timed, and the
independent verifier ``examples/verify_bundle.py`` (standard library) in its own
process, start-up included. ``--quick``: 10,000 facts.

``python -m benchmarks --only p1 --no-langgraph``
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from audit import open_store
from audit.proofs import export_run, read_bundle, verify_bundle, write_bundle
from audit.signing import generate_keys, load_public_key, load_signer
from benchmarks.harness import Row, Stat
from benchmarks.session import QUICK, Suite, log
from engine import Context, Engine, Proposal, suggestor

P1_FACTS = 100_000
P1_QUICK_FACTS = 10_000
P1_TARGET_S = 2.0
VERIFIER = Path(__file__).resolve().parent.parent / "examples" / "verify_bundle.py"


def _engine(store: object, n: int) -> Engine:
    @suggestor(name="many", dependencies=["seed"])
    def many(ctx: Context) -> list[Proposal]:
        return [Proposal("item", {"i": k, "name": f"package-{k}"}) for k in range(n)]

    engine = Engine(store=store)  # type: ignore[arg-type]
    engine.register(many)
    return engine


def run_p1(suite: Suite) -> None:
    """Export and verify a bundle of a run of 100k facts (10k with ``--quick``)."""
    n = P1_QUICK_FACTS if suite.sizes is QUICK else P1_FACTS
    workdir = os.path.join(suite.workdir, "p1")
    os.makedirs(workdir, exist_ok=True)
    key, pub = generate_keys(Path(workdir))
    signer, public = load_signer(key), load_public_key(pub)
    store = open_store(os.path.join(workdir, "audit.db"))
    bundle_path = os.path.join(workdir, "bundle.json")
    try:
        result = _engine(store, n).run({"seed": ["s"]})
        log(f"  P1: recorded a run of {len(result.context)} facts")

        def export() -> Callable[[], object]:
            def go() -> None:
                write_bundle(export_run(store, signer, result.run_id), Path(bundle_path))

            return go

        exported = suite.time(export)
        size_mb = os.path.getsize(bundle_path) / 1e6

        def verify() -> Callable[[], object]:
            def go() -> None:
                checks = verify_bundle(read_bundle(Path(bundle_path)), public)
                if not all(c.ok for c in checks):
                    raise AssertionError(f"P1: the bundle does not verify: {checks}")

            return go

        verified = suite.time(verify)

        def independent() -> Callable[[], object]:
            def go() -> None:
                done = subprocess.run(
                    [sys.executable, str(VERIFIER), bundle_path, str(pub)],
                    capture_output=True,
                    check=False,
                )
                if done.returncode != 0:
                    raise AssertionError(f"P1: {VERIFIER.name} fails: {done.stdout!r}")

            return go

        independently = suite.time(independent)
    finally:
        store.close()
    size = f"{n // 1000}k facts"
    for name, series in (
        ("P1 export --proof", exported),
        ("P1 verify-bundle", verified),
        ("P1 examples/verify_bundle.py", independently),
    ):
        suite.add(
            Row(
                name,
                size,
                "s",
                False,
                Stat.of(series, lambda s: s),
                target=("<=", P1_TARGET_S),
                note=f"bundle {size_mb:.1f} MB, SQLite store",
            ),
            series,
        )
