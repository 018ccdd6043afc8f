"""The log lines of serve, its pool and workers (issue 57, logs): the JSON and text
formats of :mod:`converge.logs`, the fields bound to a request or run, and the
secrets no line may carry. The real processes' lines are in
tests/test_logs_served.py."""

from __future__ import annotations

import io
import json
import logging
import sys
import threading
from collections.abc import Iterator
from datetime import datetime

import pytest
from freezegun import freeze_time
from typer.testing import CliRunner

from converge.cli import app
from converge.logs import (
    LOG_FORMAT_ENV,
    JsonFormatter,
    TextFormatter,
    bound,
    configure_logging,
    keep_secret,
    note,
    structured,
)

TOKEN = "cvg_Q2hhbmdlTWUtbm90LWEtcmVhbC10b2tlbi1hdC1hbGw"
PASSWORD = "pg-Secret-4242"
AUDIT_KEY = "audit-key-0123456789abcdef"


@pytest.fixture
def lines() -> Iterator[tuple[logging.Logger, io.StringIO, io.StringIO]]:
    """A logger writing through both formatters, each into its own buffer."""
    as_json, as_text = io.StringIO(), io.StringIO()
    logger = logging.getLogger("converge.test_logs")
    handlers = [logging.StreamHandler(as_json), logging.StreamHandler(as_text)]
    handlers[0].setFormatter(JsonFormatter("serve"))
    handlers[1].setFormatter(TextFormatter())
    for h in handlers:
        logger.addHandler(h)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    try:
        yield logger, as_json, as_text
    finally:
        for h in handlers:
            logger.removeHandler(h)


def _objects(buffer: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in buffer.getvalue().splitlines()]


def test_a_json_line_has_utc_time_level_event_message_and_the_fields_bound_to_its_request(
    lines: tuple[logging.Logger, io.StringIO, io.StringIO],
) -> None:
    logger, as_json, as_text = lines
    with freeze_time("2026-01-15 08:00:00.123"):
        with bound(run_id="r-1", gate_id=None) as fields:
            note(person="alice")  # learnt later, by the request's authentication
            logger.info(
                "gate %s approved", "g-1", extra={"event": "gate_decided", "gate_id": "g-1"}
            )
            assert fields == {"run_id": "r-1", "person": "alice"}
        logger.warning("outside any request")

    first, second = _objects(as_json)
    assert first == {
        "time": "2026-01-15T08:00:00.123Z",
        "level": "info",
        "event": "gate_decided",
        "message": "gate g-1 approved",
        "logger": "converge.test_logs",
        "process": "serve",
        "pid": first["pid"],
        "run_id": "r-1",
        "gate_id": "g-1",
        "person": "alice",
    }
    assert datetime.fromisoformat(str(first["time"])).utcoffset() is not None  # ISO 8601, UTC
    assert second["event"] == "test_logs"  # converge.NAME without an event: NAME
    assert "run_id" not in second and second["level"] == "warning"
    text = as_text.getvalue().splitlines()
    assert text[0] == (
        "2026-01-15T08:00:00.123Z INFO gate_decided: gate g-1 approved "
        "run_id=r-1 gate_id=g-1 person=alice"
    )


def test_uvicorns_access_line_is_an_http_request_with_method_path_status_and_client(
    lines: tuple[logging.Logger, io.StringIO, io.StringIO],
) -> None:
    _, as_json, _ = lines
    handler = logging.StreamHandler(as_json)
    handler.setFormatter(JsonFormatter("serve"))
    access = logging.getLogger("uvicorn.access")
    level = access.level
    access.addHandler(handler)
    access.setLevel(logging.INFO)
    try:
        path = f"/api/gates?token={TOKEN}"
        args = ("127.0.0.1:5000", "GET", path, "1.1", 200)
        access.info('%s - "%s %s HTTP/%s" %d', *args)
    finally:
        access.removeHandler(handler)
        access.setLevel(level)
    (line,) = _objects(as_json)
    assert line["event"] == "http_request" and line["status"] == 200
    assert (line["method"], line["path"]) == ("GET", "/api/gates?token=cvg_***")
    assert line["client"] == "127.0.0.1:5000" and TOKEN not in json.dumps(line)


@pytest.mark.parametrize(
    "said",
    [
        f"cannot connect to postgresql+psycopg://postgres:{PASSWORD}@db.internal/converge",
        f"broker redis://:{PASSWORD}@127.0.0.1:6379/0 refused",
        f"Authorization: Bearer {TOKEN}",
        f"cookie converge_session={TOKEN}",
        f"unknown token {TOKEN}",
        f"key {AUDIT_KEY} does not match",
    ],
)
def test_no_token_password_or_key_reaches_a_line_in_either_format(
    said: str, lines: tuple[logging.Logger, io.StringIO, io.StringIO]
) -> None:
    logger, as_json, as_text = lines
    keep_secret(AUDIT_KEY)
    try:
        raise RuntimeError(said)
    except RuntimeError:
        logger.exception("failed: %s", said)
    for written in (as_json.getvalue(), as_text.getvalue()):
        assert "failed: " in written and "***" in written
        for secret in (TOKEN, PASSWORD, AUDIT_KEY):
            assert secret not in written


def test_the_secrets_of_the_environment_are_learnt_when_logging_is_configured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CONVERGE_AUDIT_KEY", "another-key-of-the-store")
    monkeypatch.setenv("CONVERGE_BROKER", "amqp://user:brokerpass77@rabbit//")
    monkeypatch.setenv(LOG_FORMAT_ENV, "text")
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    pool = logging.getLogger("multiprocessing")  # billiard's (Celery's pool): no propagation
    pool_handlers, pool_propagates = list(pool.handlers), pool.propagate
    hooks = sys.excepthook, threading.excepthook
    out = io.StringIO()
    try:
        configure_logging("json", process="worker", stream=out)
        assert structured()
        import os

        assert os.environ[LOG_FORMAT_ENV] == "json"  # the processes it starts follow
        logging.getLogger("converge.anything").warning(
            "key another-key-of-the-store, password brokerpass77 (alone)"
        )
        pool.error("Process %r pid:%r exited with %r", "ForkPoolWorker-1", 7, "exitcode 143")
        try:
            raise ValueError(f"boom with {TOKEN}")
        except ValueError as exc:  # what the interpreter does with an uncaught one
            sys.excepthook(ValueError, exc, exc.__traceback__)
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        sys.excepthook, threading.excepthook = hooks
        pool.handlers[:], pool.propagate = pool_handlers, pool_propagates
        logging.captureWarnings(False)
    assert not structured()  # this process's commands print their errors again
    line, exited, uncaught = (json.loads(x) for x in out.getvalue().splitlines()[-3:])
    assert exited["event"] == "worker" and "exited with" in exited["message"]
    assert line["message"] == "key ***, password *** (alone)"
    assert line["process"] == "worker"
    # an uncaught exception is one JSON line too, its traceback inside, redacted
    assert uncaught["event"] == "uncaught_exception" and uncaught["level"] == "critical"
    assert "ValueError: boom with cvg_***" in uncaught["exception"]
    assert TOKEN not in out.getvalue()


def test_an_unknown_log_format_is_refused_naming_the_option() -> None:
    res = CliRunner().invoke(app, ["serve", "--log-format", "xml"])
    assert res.exit_code == 2
    assert "--log-format" in res.output and "xml" in res.output
