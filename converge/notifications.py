"""Gate notifications and escalation: :func:`notify_due`.

A HITL gate's rules (``GateRecord.extra["rules"]``, from the job file's ``hitl:``
or ``require_approval(...)``) may name sinks, ``notify: [{webhook: URL,
secret_env: VAR} | {email: ADDRESS}]``, and an escalation, ``escalate_after_s``
seconds after opening to ``escalate_to``. Each pass of :func:`notify_due` tells
every sink each event of each gate that is due and not told yet:

- ``opened``: every gate with sinks;
- ``escalated``: a gate still pending ``escalate_after_s`` after it opened (its
  approvers widen to ``escalate_to``; recorded once, with a ``gate_escalated``
  event in the run's chain, even without sinks);
- ``decided``: a gate approved or rejected; ``expired``: decided by its deadline.

A webhook gets a POST of the JSON :func:`payload` signed with HMAC-SHA256 under
the secret in ``$VAR`` (header ``X-Converge-Signature: sha256=HEX`` over the exact
body bytes), an email goes over SMTP (``$CONVERGE_SMTP_URL``, ``smtp://HOST:PORT``
or ``smtps://``, optional ``USER:PASSWORD@``; sender ``$CONVERGE_SMTP_FROM``).
Each is tried up to :data:`MAX_ATTEMPTS` times with backoff, and every attempt is
recorded in the store's outbox (:mod:`audit.notifications._outbox`), so a notification
claimed by a process that dies is sent by the next pass. ``converge serve`` and
``converge worker`` run a pass at every deadline check, and ``converge run``,
``approve``, ``reject`` and ``resume`` one when they finish.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import smtplib
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from email.message import EmailMessage
from typing import Any
from urllib.parse import unquote, urlsplit

from audit import notifications as outbox
from audit.notifications import Delivery, deliveries
from audit.store import SqlRunStore
from converge.errors import NotSent
from engine import ConvergeError
from engine.status import GateStatus
from engine.store import GateRecord

__all__ = [
    "MAX_ATTEMPTS",
    "SIGNATURE_HEADER",
    "Delivery",
    "NotSent",
    "deliveries",
    "notify_after_command",
    "notify_due",
    "payload",
    "signature",
]

log = logging.getLogger("converge.notifications")

MAX_ATTEMPTS = 3
"""How many times one notification is tried before it is recorded ``failed``."""

BACKOFF_S = (0.5, 1.0)
"""Seconds waited after the first and the second failed attempt."""

TIMEOUT_S = 5.0
"""Seconds one webhook request or SMTP conversation may take."""

SIGNATURE_HEADER = "X-Converge-Signature"
"""The header carrying ``sha256=`` + the hex HMAC-SHA256 of the body under the sink's secret."""

SMTP_URL_ENV = "CONVERGE_SMTP_URL"
SMTP_FROM_ENV = "CONVERGE_SMTP_FROM"

Clock = Callable[[], float]
Sleep = Callable[[float], None]


@dataclass(frozen=True, slots=True)
class Sink:
    """Where a gate's notifications go: ``key`` is ``webhook:URL`` or ``email:ADDRESS``."""

    key: str
    webhook: str | None = None
    secret_env: str | None = None
    email: str | None = None


def rules_of(gate: GateRecord) -> dict[str, Any]:
    """The gate's decision rules (``extra["rules"]``; empty when it has none)."""
    rules = gate.extra.get("rules") if isinstance(gate.extra, dict) else None
    return rules if isinstance(rules, dict) else {}


def sinks_of(rules: dict[str, Any]) -> list[Sink]:
    """The sinks ``rules["notify"]`` names (an entry naming neither is skipped)."""
    out: list[Sink] = []
    for entry in rules.get("notify") or ():
        if not isinstance(entry, dict):
            continue
        if isinstance(entry.get("webhook"), str):
            secret_env = entry.get("secret_env")
            out.append(
                Sink(
                    f"webhook:{entry['webhook']}",
                    webhook=entry["webhook"],
                    secret_env=secret_env if isinstance(secret_env, str) else None,
                )
            )
        elif isinstance(entry.get("email"), str):
            out.append(Sink(f"email:{entry['email']}", email=entry["email"]))
        else:
            log.warning("a notify entry names neither webhook nor email: %s", sorted(entry))
    return out


def _names(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list | tuple) else []


def escalation_at(gate: GateRecord, rules: dict[str, Any]) -> float | None:
    """When the gate escalates (unix seconds), or None: no ``escalate_after_s``
    and ``escalate_to``."""
    after = rules.get("escalate_after_s")
    if not isinstance(after, int | float) or not _names(rules.get("escalate_to")):
        return None
    return gate.opened_at + float(after)


def approvers_at(gate: GateRecord, rules: dict[str, Any], at: float) -> list[str] | None:
    """Who may decide the gate at ``at`` by its rules: ``approvers`` (None: any
    approver), widened by ``escalate_to`` once escalated."""
    approvers = rules.get("approvers")
    if approvers is None:
        return None
    names = _names(approvers)
    when = escalation_at(gate, rules)
    if when is not None and at >= when:
        names = sorted({*names, *_names(rules.get("escalate_to"))})
    return names


def event_time(gate: GateRecord, rules: dict[str, Any], event: str) -> float:
    """When ``event`` happened to the gate (unix seconds)."""
    if event == "escalated":
        return escalation_at(gate, rules) or gate.opened_at
    if event in ("decided", "expired") and gate.decided_at is not None:
        return gate.decided_at
    return gate.opened_at


def payload(gate: GateRecord, event: str) -> dict[str, Any]:
    """The JSON a sink is told of ``event`` of ``gate``: ``{"event", "gate_id",
    "run_id", "summary", "status", "decided_by", "reason", "approvers", "ts"}``
    (``status`` as of the event, ``approvers`` who may decide then, null for any
    approver, ``ts`` when it happened in unix seconds); an ``escalated`` one also
    carries ``escalate_to``."""
    rules = rules_of(gate)
    ts = event_time(gate, rules, event)
    final = event in ("decided", "expired")
    body: dict[str, Any] = {
        "event": event,
        "gate_id": gate.gate_id,
        "run_id": gate.run_id,
        "summary": gate.summary,
        "status": gate.status if final else GateStatus.PENDING,
        "decided_by": gate.decided_by if final else None,
        "reason": gate.reason if final else None,
        "approvers": approvers_at(gate, rules, ts),
        "ts": ts,
    }
    if event == "escalated":
        body["escalate_to"] = _names(rules.get("escalate_to"))
    return body


def signature(body: bytes, secret: str) -> str:
    """The ``X-Converge-Signature`` value: ``sha256=`` + hex HMAC-SHA256 of ``body``."""
    return "sha256=" + hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


def due_events(gate: GateRecord, rules: dict[str, Any], now: float) -> list[str]:
    """The events of ``gate`` that have happened by ``now``, in order."""
    events = ["opened"]
    when = escalation_at(gate, rules)
    if gate.status == GateStatus.PENDING and when is not None and now >= when:
        events.append("escalated")
    if gate.status in (GateStatus.APPROVED, GateStatus.REJECTED):
        events.append("decided")
    elif gate.status == GateStatus.EXPIRED:
        events.append("expired")
    return events


def _send_webhook(sink: Sink, body: bytes, gate: GateRecord, event: str) -> tuple[bool, str]:
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "converge-notifications",
        "X-Converge-Event": event,
        "X-Converge-Delivery": f"{gate.gate_id}/{event}",
    }
    if sink.secret_env is not None:
        secret = os.environ.get(sink.secret_env)
        if not secret:
            raise NotSent(f"not sent: ${sink.secret_env} (the webhook's secret) is not set")
        headers[SIGNATURE_HEADER] = signature(body, secret)
    try:
        import httpx
    except ImportError:  # pragma: no cover - the web extra brings it
        raise NotSent("not sent: webhooks need httpx (pip install converge-engine[web])") from None
    assert sink.webhook is not None
    try:
        answer = httpx.post(sink.webhook, content=body, headers=headers, timeout=TIMEOUT_S)
    except Exception as exc:  # any transport failure is this attempt's outcome
        return False, f"error: {type(exc).__name__}: {exc}"
    return answer.is_success, f"HTTP {answer.status_code}"


def _smtp_settings() -> tuple[str, int, bool, str | None, str | None, str]:
    url = os.environ.get(SMTP_URL_ENV)
    sender = os.environ.get(SMTP_FROM_ENV)
    if not url:
        raise NotSent(f"not sent: ${SMTP_URL_ENV} is not set (smtp://HOST:PORT)")
    if not sender:
        raise NotSent(f"not sent: ${SMTP_FROM_ENV} (the sender's address) is not set")
    parts = urlsplit(url)
    if parts.scheme not in ("smtp", "smtps") or not parts.hostname:
        raise NotSent(f"not sent: ${SMTP_URL_ENV} must be smtp://HOST:PORT or smtps://HOST:PORT")
    tls = parts.scheme == "smtps"
    user = unquote(parts.username) if parts.username else None
    password = unquote(parts.password) if parts.password else None
    return parts.hostname, parts.port or (465 if tls else 25), tls, user, password, sender


def email_message(
    gate: GateRecord, event: str, body: dict[str, Any], sender: str, to: str
) -> EmailMessage:
    """The email telling ``to`` of ``event``: its subject names the event and the gate."""
    msg = EmailMessage()
    summary = " ".join(gate.summary.split())[:120]  # one line: a header takes no newline
    msg["Subject"] = f"[converge] gate {gate.gate_id} {event}: {summary}"
    msg["From"] = sender
    msg["To"] = to
    lines = [f"{k}: {v}" for k, v in body.items() if v is not None]
    msg.set_content("\n".join(lines) + "\n")
    return msg


def _send_email(sink: Sink, gate: GateRecord, event: str, body: dict[str, Any]) -> tuple[bool, str]:
    host, port, tls, user, password, sender = _smtp_settings()
    assert sink.email is not None
    try:
        msg = email_message(gate, event, body, sender, sink.email)
    except ValueError as exc:  # e.g. an address with a line break
        raise NotSent(f"not sent: {exc}") from None
    smtp_class = smtplib.SMTP_SSL if tls else smtplib.SMTP
    try:
        with smtp_class(host, port, timeout=TIMEOUT_S) as smtp:
            if user is not None and password is not None:
                smtp.login(user, password)
            smtp.ehlo_or_helo_if_needed()
            code, answer = smtp.mail(sender)
            if code == 250:
                code, answer = smtp.rcpt(sink.email)
            if code in (250, 251):
                code, answer = smtp.data(msg.as_bytes())
    except Exception as exc:  # any SMTP or socket failure is this attempt's outcome
        return False, f"error: {type(exc).__name__}: {exc}"
    return code == 250, f"{code} {answer.decode('utf-8', 'replace')}".strip()


def _deliver(
    store: SqlRunStore, gate: GateRecord, event: str, sink: Sink, clock: Clock, sleep: Sleep
) -> Delivery:
    """Send one claimed notification, recording each attempt; its last record."""
    before = outbox.delivery(store, gate.gate_id, event, sink.key)
    first = (before.attempts if before is not None else 0) + 1
    last = max(MAX_ATTEMPTS, first)
    body = payload(gate, event)
    data = json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")
    for n in range(first, last + 1):
        unsendable = False
        try:
            if sink.webhook is not None:
                ok, answer = _send_webhook(sink, data, gate, event)
            else:
                ok, answer = _send_email(sink, gate, event, body)
        except NotSent as exc:  # retrying would not help
            ok, answer, unsendable = False, str(exc), True
        done = ok or unsendable or n >= last
        status = outbox.DELIVERED if ok else (outbox.FAILED if done else outbox.SENDING)
        recorded_ = outbox.record_attempt(
            store,
            gate.gate_id,
            event,
            sink.key,
            attempts=n,
            status=status,
            answer=answer,
            at=clock(),
        )
        log.info("gate %s %s to %s: %s (%s)", gate.gate_id, event, sink.key, status, answer)
        if done:
            return recorded_
        sleep(BACKOFF_S[min(n - first, len(BACKOFF_S) - 1)])
    raise AssertionError("unreachable")  # pragma: no cover


def _notify_gate(
    store: SqlRunStore,
    gate: GateRecord,
    told: Sequence[Delivery],
    now: float,
    clock: Clock,
    sleep: Sleep,
) -> list[Delivery]:
    rules = rules_of(gate)
    sinks = sinks_of(rules)
    events = due_events(gate, rules, now)
    have = {(d.event, d.sink): d.status for d in told}
    # one still sending is another process's, unless its claim is stale (claim decides)
    wanted = [
        (event, sink.key)
        for event in events
        for sink in sinks
        if have.get((event, sink.key), outbox.SENDING) == outbox.SENDING
    ]
    escalate = "escalated" in events and ("escalated", outbox.CHAIN_SINK) not in have
    if not wanted and not escalate:
        return []
    escalate_to = _names(rules.get("escalate_to")) if escalate else None
    taken = outbox.claim(store, gate, wanted, now=now, escalate_to=escalate_to)
    by_key = {s.key: s for s in sinks}
    out: list[Delivery] = []
    for event, key in sorted(taken, key=lambda t: outbox.EVENTS.index(t[0])):
        if key == outbox.CHAIN_SINK:
            log.info("gate %s escalated to %s", gate.gate_id, ", ".join(escalate_to or ()))
            found = outbox.delivery(store, gate.gate_id, event, key)
            if found is not None:
                out.append(found)
            continue
        out.append(_deliver(store, gate, event, by_key[key], clock, sleep))
    return out


def notify_due(
    store: SqlRunStore, *, clock: Clock = time.time, sleep: Sleep = time.sleep
) -> list[Delivery]:
    """One pass: tell every gate's sinks each event due and not told yet, and record
    each escalation due (see the module docstring). ``clock`` gives unix seconds
    (when an escalation is due; the times recorded), ``sleep`` waits between
    attempts (seconds). Returns what this pass did, one :class:`Delivery` per
    notification (after its last attempt) and per escalation recorded; another
    process's claims are left to it. A gate that fails (a store error, a bad
    sink) is logged and skipped; ``StoreError`` when the gates cannot be listed."""
    now = clock()
    candidates = outbox.gates_to_notify(store)
    told = outbox.recorded(store, [g.gate_id for g in candidates])
    out: list[Delivery] = []
    for gate in candidates:
        try:
            out.extend(_notify_gate(store, gate, told.get(gate.gate_id, ()), now, clock, sleep))
        except ConvergeError as exc:  # a store error: the next pass tries again
            log.warning("cannot notify gate %s: %s", gate.gate_id, exc)
        except Exception:  # a bad sink of one gate must not stop the others, nor a keeper
            log.exception("cannot notify gate %s", gate.gate_id)
    return out


def notify_after_command(store: object) -> None:
    """One :func:`notify_due` pass at the end of a CLI command on ``store`` (nothing
    without a SQL store). A notification that fails is said on stderr; nothing here
    raises, so the command's exit code stays its own."""
    if not isinstance(store, SqlRunStore):
        return
    try:
        done = notify_due(store)
    except Exception as exc:  # never the command's outcome
        sys.stderr.write(f"converge: notifications not sent: {exc}\n")
        return
    for d in done:
        if d.status == outbox.FAILED:
            sys.stderr.write(
                f"converge: notifying {d.sink} of gate {d.gate_id} {d.event} failed "
                f"after {d.attempts} attempt(s): {d.answer}\n"
            )
