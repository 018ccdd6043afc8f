"""The heads of many runs at once: what a server streaming them asks when the store
tells it something was committed (``converge.web.feeds``)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select

from audit.core import StoreCore
from audit.tables import runs

__all__ = ["run_heads"]

CHUNK = 500
"""Run ids asked per statement at most."""


def run_heads(store: StoreCore, run_ids: Sequence[str]) -> dict[str, int]:
    """The last seq of each of ``run_ids`` that the store holds (one statement per
    :data:`CHUNK` of them). Raises ``StoreError``."""
    wanted = list(dict.fromkeys(run_ids))
    heads: dict[str, int] = {}
    with store.transaction(write=False, single=len(wanted) <= CHUNK) as conn:
        for start in range(0, len(wanted), CHUNK):
            rows = conn.execute(
                select(runs.c.run_id, runs.c.last_seq).where(
                    runs.c.run_id.in_(wanted[start : start + CHUNK])
                )
            )
            heads.update((str(r[0]), int(r[1])) for r in rows)
    return heads
