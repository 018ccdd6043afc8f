"""A run whose worker died in the middle (kill -9) and that another worker recovered
replays to the same facts and stop (issue 53: the journey suite found ``converge
replay`` naming the cycles the recovery ran again as a divergence).

The recovery runs again the cycles after the run's last checkpoint, promoting
nothing twice (exactly once): what the dead worker recorded of those cycles is
superseded by what the recovery recorded. SQLite and PostgreSQL; the first
``converge worker --run`` dies after each of its first writes in turn (the fault
hook of :mod:`tests.faultfixtures`), a second one recovers the run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from audit import open_store
from converge.jobs import load_job
from converge.run_queue import Action
from converge.service import submit_run
from tests.faultfixtures import fork_cli, make_stores, snapshot
from tests.hitlfixtures import STORES
from tests.servicefixtures import beat_job, reference

KILL_AFTER = range(1, 9)
"""The write after which the first worker dies: its take, its start and checkpoint,
each of its cycles, its stop."""


class Nowhere:
    """A run queue that sends nothing (the test starts the workers itself)."""

    def send(self, run_id: str, action: Action = "run") -> None:
        pass


def _submitted(job: Path, url: str) -> str:
    store = open_store(url)
    try:
        return submit_run(load_job(job), store, Nowhere())
    finally:
        store.close()


@pytest.mark.parametrize("kind", STORES)
def test_a_run_recovered_after_its_worker_died_replays_the_same(kind: str, tmp_path: Path) -> None:
    job = beat_job(tmp_path / "beat.yaml", steps=4, sleep_ms=0)
    want = reference(job, tmp_path)
    with make_stores(kind, tmp_path) as stores:
        for n in KILL_AFTER:
            url, workdir = stores.fresh(), tmp_path / f"killed-after-{n}"
            run_id = _submitted(job, url)
            died = fork_cli(["worker", "--run", run_id, "--db", url], workdir, kill_after=n)
            assert died.killed, died
            recovered = fork_cli(["worker", "--run", run_id, "--db", url], workdir)
            assert recovered.returncode == 0, recovered
            got = snapshot(url, run_id)
            assert (got.facts_root, got.kind) == (want.facts_root, want.kind)

            replayed = fork_cli(["replay", run_id, "--db", url], workdir)

            assert replayed.returncode == 0, f"killed after write {n}:\n{replayed.stdout}"
