"""A worker process opens its store as it starts, not on its first run (issue 22, S1)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from celery.signals import worker_process_init

import converge.workers.runs as runs
from converge.workers import celery_app


@pytest.fixture
def fresh_worker_store(monkeypatch: pytest.MonkeyPatch) -> None:
    """This test process as a worker process that has opened no store yet."""
    monkeypatch.setattr(runs, "_store", None)


def test_a_worker_process_opens_its_store_when_it_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_worker_store: None
) -> None:
    db = tmp_path / "worker.db"
    monkeypatch.setenv("CONVERGE_DB", str(db))
    app = celery_app("memory://", None)
    runs.register_run_task(app)
    try:
        worker_process_init.send(sender=None)  # what Celery sends in each new child
        assert runs._store is not None
        opened = runs._store[1]
        assert db.exists()
        assert runs._worker_store() is opened  # the first run takes that same store
    finally:
        worker_process_init.disconnect(runs.warm_up)
        if runs._store is not None:
            runs._store[1].close()
        app.close()


def test_a_store_that_cannot_be_opened_at_start_is_left_to_the_first_run(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    fresh_worker_store: None,
) -> None:
    (tmp_path / "not-a-db").write_text("this is no SQLite file" * 100)
    monkeypatch.setenv("CONVERGE_DB", str(tmp_path / "not-a-db"))
    with caplog.at_level(logging.WARNING, logger="converge.worker"):
        runs.warm_up()  # no exception: the worker process still starts
    assert runs._store is None
    assert "worker store not opened at start" in caplog.text
