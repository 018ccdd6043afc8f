"""Gate notifications and escalation (issue 23): a gate that opens, is decided or
expires is told to its sinks — a webhook signed with HMAC-SHA256, an email over
SMTP — each attempt recorded in the store's outbox, retried with backoff; a gate
escalates once at its time, recorded in its run's chain, whoever keeps the
deadlines. Webhook receivers and the SMTP server are started by the tests on
127.0.0.1; SQLite and PostgreSQL."""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from typer.testing import CliRunner

from audit import SqlRunStore, open_store
from audit.notifications import LEASE_S, claim
from converge import notifications
from converge.cli import app
from converge.jobs import parse_job
from converge.notifications import Delivery, deliveries, notify_due
from converge.service import DeadlineKeeper, LocalRunPool
from engine import GateDecision, GateRecord
from tests.hitlfixtures import INITIAL, make_engine
from tests.webfixtures import QUORUM_JOB, run_job

SECRET_ENV = "CONVERGE_TEST_WEBHOOK_SECRET"
SECRET = "s3cret-for-the-test"


@pytest.fixture
def store(store_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[SqlRunStore]:
    monkeypatch.setenv(SECRET_ENV, SECRET)
    s = open_store(store_url)
    try:
        yield s
    finally:
        s.close()


class Receiver:
    """A webhook receiver on 127.0.0.1: answers ``failures`` 500s, then 200s."""

    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.requests: list[tuple[dict[str, str], bytes]] = []
        self.url = ""

    def bodies(self) -> list[dict[str, Any]]:
        """The JSON bodies received, in order."""
        return [json.loads(body) for _, body in self.requests]

    def events(self) -> list[tuple[str, str]]:
        """(gate_id, event) of each request received, in order."""
        return [(b["gate_id"], b["event"]) for b in self.bodies()]


@contextmanager
def receiving(failures: int = 0) -> Iterator[Receiver]:
    """A :class:`Receiver` served in a thread on a port bound by the test."""
    receiver = Receiver(failures)
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            with lock:
                receiver.requests.append((dict(self.headers.items()), body))
                failing = len(receiver.requests) <= receiver.failures
            self.send_response(500 if failing else 200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def hook(receiver: Receiver) -> dict[str, str]:
    """The notify entry of a webhook to ``receiver``, signed with the test's secret."""
    return {"webhook": receiver.url, "secret_env": SECRET_ENV}


def signed_validly(headers: dict[str, str], body: bytes) -> bool:
    expected = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(headers["X-Converge-Signature"], expected)


def open_gate(store: SqlRunStore, **rules: Any) -> GateRecord:
    """A run of the HITL fixtures paused at its gate with these ``require_approval`` rules."""
    result = make_engine(store, **rules).run(INITIAL)
    [gate] = [g for g in store.gates(pending=True) if g.run_id == result.run_id]
    return gate


def job_gate(store: SqlRunStore, hitl: str) -> GateRecord:
    """A run of the quorum job (tests/webfixtures.py) with ``hitl`` added to its gate,
    paused there: a run with a job file, which a deadline keeper can resume."""
    result = run_job(parse_job(QUORUM_JOB % (1, ", " + hitl), "notify.yaml"), store)
    [gate] = [g for g in store.gates(pending=True) if g.run_id == result.run_id]
    return gate


def no_sleep(waits: list[float]) -> Callable[[float], None]:
    return waits.append


def test_a_webhook_is_told_a_gate_opened_was_decided_and_expired_with_a_valid_signature(
    store: SqlRunStore,
) -> None:
    with receiving() as receiver:
        decided = open_gate(store, notify=[hook(receiver)])
        expiring = job_gate(
            store, f"timeout_s: 60, on_timeout: reject, notify: [{json.dumps(hook(receiver))}]"
        )

        notify_due(store)
        make_engine(store).resume(decided.gate_id, GateDecision.approve(by="alice", reason="ok"))
        notify_due(store)
        assert expiring.expires_at is not None
        pool = LocalRunPool(store)
        keeper = DeadlineKeeper(store, pool, clock=lambda: expiring.expires_at + 5)
        assert keeper.tick() == [expiring.gate_id]
        pool.wait(timeout=60)
        pool.close()
        notify_due(store)  # nothing more is due: nothing is told twice

    assert sorted(receiver.events()) == sorted(
        [
            (decided.gate_id, "opened"),
            (expiring.gate_id, "opened"),
            (decided.gate_id, "decided"),
            (expiring.gate_id, "expired"),
        ]
    )
    assert all(signed_validly(headers, body) for headers, body in receiver.requests)
    by_event = {(b["gate_id"], b["event"]): b for b in receiver.bodies()}
    told = by_event[decided.gate_id, "decided"]
    assert told == {
        "event": "decided",
        "gate_id": decided.gate_id,
        "run_id": decided.run_id,
        "summary": "Classify b",
        "status": "approved",
        "decided_by": "alice",
        "reason": "ok",
        "approvers": None,
        "ts": store.get_gate(decided.gate_id).decided_at,
    }
    opened = by_event[decided.gate_id, "opened"]
    assert (opened["status"], opened["decided_by"], opened["ts"]) == (
        "pending",
        None,
        decided.opened_at,
    )
    expired = by_event[expiring.gate_id, "expired"]
    assert (expired["status"], expired["decided_by"]) == ("expired", "timeout")
    assert [
        (d.event, d.status, d.attempts, d.answer) for d in deliveries(store, decided.gate_id)
    ] == [
        ("opened", "delivered", 1, "HTTP 200"),
        ("decided", "delivered", 1, "HTTP 200"),
    ]


def test_a_signature_made_with_another_secret_does_not_verify(store: SqlRunStore) -> None:
    with receiving() as receiver:
        open_gate(store, notify=[hook(receiver)])
        notify_due(store)
    [(headers, body)] = receiver.requests
    assert signed_validly(headers, body)
    assert not signed_validly(headers, body + b" ")  # the signature covers the exact bytes
    assert SECRET not in json.dumps(headers) + body.decode()


@contextmanager
def _first_pass(
    store: SqlRunStore, failures: int
) -> Iterator[tuple[Receiver, GateRecord, Delivery, list[float]]]:
    """A gate opened with a webhook to a receiver answering 500 ``failures`` times, and
    the first :func:`notify_due` pass (its backoff recorded, not slept): yields the
    receiver, the gate, the pass's one delivery and the waits."""
    waits: list[float] = []
    with receiving(failures=failures) as receiver:
        gate = open_gate(store, notify=[hook(receiver)])
        [done] = notify_due(store, sleep=no_sleep(waits))
        yield receiver, gate, done, waits


def test_a_receiver_failing_twice_gets_the_third_attempt_after_backoff_each_one_recorded(
    store: SqlRunStore,
) -> None:
    with _first_pass(store, failures=2) as (receiver, gate, done, waits):
        assert len(receiver.requests) == 3
        assert waits == [0.5, 1.0]
        assert (done.event, done.status, done.attempts, done.answer) == (
            "opened",
            "delivered",
            3,
            "HTTP 200",
        )
        [recorded] = deliveries(store, gate.gate_id)
        assert recorded == done
        assert recorded.sink == f"webhook:{receiver.url}"
        assert recorded.last_at is not None and recorded.last_at >= recorded.first_at


def test_a_receiver_that_keeps_failing_is_given_up_after_three_attempts_and_not_retried(
    store: SqlRunStore,
) -> None:
    with _first_pass(store, failures=100) as (receiver, gate, done, waits):
        assert notify_due(store, sleep=no_sleep(waits)) == []

    assert len(receiver.requests) == 3
    assert (done.status, done.attempts, done.answer) == ("failed", 3, "HTTP 500")
    assert [d.status for d in deliveries(store, gate.gate_id)] == ["failed"]


def test_a_webhook_whose_secret_is_not_set_is_recorded_failed_naming_the_variable(
    store: SqlRunStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(SECRET_ENV)
    with receiving() as receiver:
        gate = open_gate(store, notify=[hook(receiver)])
        [done] = notify_due(store, sleep=no_sleep([]))
    assert receiver.requests == []  # never sent unsigned
    assert (done.status, done.attempts) == ("failed", 1)  # not retried: the setting is missing
    assert SECRET_ENV in (done.answer or "")
    assert deliveries(store, gate.gate_id) == [done]


class Mailbox:
    """An aiosmtpd handler keeping the messages it accepts."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, list[str], bytes]] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append((envelope.mail_from, list(envelope.rcpt_tos), envelope.content))
        return "250 Message accepted for delivery"


@contextmanager
def smtp_server() -> Iterator[tuple[Mailbox, int]]:
    """An SMTP server on 127.0.0.1 (a port bound by the test) and its mailbox."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]

    class OnSocket(Controller):
        def _create_server(self) -> Any:
            return self.loop.create_server(self._factory_invoker, sock=sock)

    mailbox = Mailbox()
    controller = OnSocket(mailbox, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield mailbox, port
    finally:
        controller.stop()
        sock.close()


def test_an_smtp_server_receives_the_email_naming_the_event_and_the_gate(
    store: SqlRunStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from email import message_from_bytes

    with smtp_server() as (mailbox, port):
        monkeypatch.setenv("CONVERGE_SMTP_URL", f"smtp://127.0.0.1:{port}")
        monkeypatch.setenv("CONVERGE_SMTP_FROM", "converge@example.org")
        gate = open_gate(store, notify=[{"email": "legal@example.org"}])
        [done] = notify_due(store)

    [(sender, to, content)] = mailbox.messages
    assert (sender, to) == ("converge@example.org", ["legal@example.org"])
    mail = message_from_bytes(content)
    assert mail["Subject"] == f"[converge] gate {gate.gate_id} opened: Classify b"
    assert f"run_id: {gate.run_id}" in mail.get_payload()
    assert (done.sink, done.status, done.attempts) == ("email:legal@example.org", "delivered", 1)
    assert (done.answer or "").startswith("250 ")


def test_an_email_without_an_smtp_server_configured_is_recorded_failed(
    store: SqlRunStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CONVERGE_SMTP_URL", raising=False)
    gate = open_gate(store, notify=[{"email": "legal@example.org"}])
    [done] = notify_due(store, sleep=no_sleep([]))
    assert done.status == "failed" and "CONVERGE_SMTP_URL" in (done.answer or "")
    assert deliveries(store, gate.gate_id) == [done]


def test_escalation_at_its_time_widens_the_approvers_and_is_told_once_with_two_keepers(
    store: SqlRunStore, store_url: str
) -> None:
    with receiving() as receiver:
        gate = open_gate(
            store,
            notify=[hook(receiver)],
            approvers=["alice"],
            escalate_after_s=5,
            escalate_to=["legal"],
        )
        before = DeadlineKeeper(store, LocalRunPool(store), clock=lambda: gate.opened_at + 4.9)
        before.tick()
        assert receiver.events() == [(gate.gate_id, "opened")]

        other = open_store(store_url)
        keepers = [
            DeadlineKeeper(s, LocalRunPool(s), clock=lambda: gate.opened_at + 5)
            for s in (store, other)
        ]
        start = threading.Barrier(2)

        def tick(keeper: DeadlineKeeper) -> None:
            start.wait(timeout=30)
            keeper.tick()

        threads = [threading.Thread(target=tick, args=(k,)) for k in keepers]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        for k in keepers:
            k.tick()  # a later pass tells nothing again
        other.close()

    assert receiver.events() == [(gate.gate_id, "opened"), (gate.gate_id, "escalated")]
    escalated = receiver.bodies()[1]
    assert escalated["approvers"] == ["alice", "legal"]
    assert escalated["escalate_to"] == ["legal"]
    assert escalated["ts"] == gate.opened_at + 5
    assert receiver.bodies()[0]["approvers"] == ["alice"]
    [event] = store.events(gate.run_id, kinds=["gate_escalated"])
    assert event.payload == {
        "gate_id": gate.gate_id,
        "escalate_to": ["legal"],
        "at": gate.opened_at + 5,
    }
    assert [(d.event, d.sink, d.status) for d in deliveries(store, gate.gate_id)] == [
        ("opened", f"webhook:{receiver.url}", "delivered"),
        ("escalated", "chain", "recorded"),
        ("escalated", f"webhook:{receiver.url}", "delivered"),
    ]
    # the chain stays valid, and the run resumes past the event appended while it paused
    result = make_engine(store).resume(gate.gate_id, GateDecision.approve(by="legal-lee"))
    assert result.stop_reason.kind_code() != "hitl_gate_pending"
    assert store.verify(gate.run_id).ok


def test_a_gate_decided_before_its_escalation_time_never_escalates(store: SqlRunStore) -> None:
    gate = open_gate(store, approvers=["alice"], escalate_after_s=5, escalate_to=["legal"])
    make_engine(store).resume(gate.gate_id, GateDecision.approve(by="alice"))
    assert notify_due(store, clock=lambda: gate.opened_at + 60) == []
    assert store.events(gate.run_id, kinds=["gate_escalated"]) == []


def test_a_delivery_claimed_by_a_process_that_died_is_sent_after_its_lease(
    store: SqlRunStore,
) -> None:
    with receiving() as receiver:
        gate = open_gate(store, notify=[hook(receiver)])
        sink = f"webhook:{receiver.url}"
        # another process claimed the notification, then died before sending it
        assert claim(store, gate, [("opened", sink)], now=gate.opened_at) == [("opened", sink)]
        assert notify_due(store, clock=lambda: gate.opened_at + 1) == []
        assert receiver.requests == []
        [done] = notify_due(store, clock=lambda: gate.opened_at + LEASE_S + 1)

    assert receiver.events() == [(gate.gate_id, "opened")]
    assert (done.status, done.attempts) == ("delivered", 1)


def test_run_and_approve_on_the_command_line_notify_and_keep_their_exit_codes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_ENV, SECRET)
    monkeypatch.setattr(notifications, "BACKOFF_S", (0.0, 0.0))
    db = str(tmp_path / "runs.db")
    runner = CliRunner()
    with receiving() as receiver:
        sinks = f", notify: [{{webhook: '{receiver.url}', secret_env: {SECRET_ENV}}}]"
        job = tmp_path / "quorum.yaml"
        job.write_text(QUORUM_JOB % (1, sinks))
        paused = runner.invoke(app, ["run", str(job), "--db", db])
        assert paused.exit_code == 10, paused.output
        assert receiver.events()[0][1] == "opened"
        gate_id = receiver.events()[0][0]
        done = runner.invoke(app, ["approve", gate_id, "--by", "alice", "--db", db])
        assert done.exit_code == 0, done.output
    assert receiver.events() == [(gate_id, "opened"), (gate_id, "decided")]

    # a sink that cannot be reached: said on stderr, the exit code stays the stop's
    dead = tmp_path / "dead.yaml"
    dead.write_text(QUORUM_JOB % (1, ", notify: [{webhook: 'http://127.0.0.1:9/none'}]"))
    failed = runner.invoke(app, ["run", str(dead), "--db", db])
    assert failed.exit_code == 10
    assert "failed after 3 attempt(s)" in failed.stderr


def test_deliveries_of_a_gate_without_sinks_or_unknown_are_empty(store: SqlRunStore) -> None:
    gate = open_gate(store)
    assert notify_due(store) == []
    assert deliveries(store, gate.gate_id) == []
    assert deliveries(store, "no-such-gate") == []


def test_an_address_with_a_line_break_is_not_sent_nor_does_it_stop_the_other_sinks(
    store: SqlRunStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONVERGE_SMTP_URL", "smtp://127.0.0.1:9")  # never reached
    monkeypatch.setenv("CONVERGE_SMTP_FROM", "converge@example.org")
    with receiving() as receiver:
        injected = {"email": "legal@example.org\nBcc: everyone@example.org"}
        gate = open_gate(store, notify=[injected, hook(receiver)])
        done = {d.sink.split(":")[0]: d for d in notify_due(store, sleep=no_sleep([]))}
    assert receiver.events() == [(gate.gate_id, "opened")]
    assert (done["webhook"].status, done["email"].status, done["email"].attempts) == (
        "delivered",
        "failed",
        1,
    )
    assert (done["email"].answer or "").startswith("not sent:")
