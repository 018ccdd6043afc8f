"""Run event streams (``GET /api/runs/{id}/events``) followed as a client follows
them: each by a ``curl -N`` process of its own (no thread in the test process,
which forks the commands of the checks), its body and status in files.

A :class:`Follower` knows whether its stream ended, its HTTP status, and the events
it received (``id:``, ``event:`` and ``data:`` lines of Server-Sent Events).
"""

from __future__ import annotations

import itertools
import json
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Follower", "SseEvent", "parse_sse"]

_numbers = itertools.count(1)


@dataclass(frozen=True)
class SseEvent:
    """One event of a stream: its ``id:`` (the seq), ``event:`` (the kind), ``data:``."""

    seq: int | None
    kind: str
    data: dict[str, Any] | None


def parse_sse(body: str) -> list[SseEvent]:
    """The events of a Server-Sent Events body (comments and keep-alives left out)."""
    events: list[SseEvent] = []
    for block in body.replace("\r\n", "\n").split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.split("\n"):
            if not line or line.startswith(":") or ":" not in line:
                continue
            name, _, value = line.partition(":")
            fields[name] = value[1:] if value.startswith(" ") else value
        if "event" not in fields and "data" not in fields:
            continue
        try:
            data = json.loads(fields.get("data", "null"))
        except json.JSONDecodeError:
            data = None
        seq = fields.get("id")
        events.append(
            SseEvent(
                int(seq) if seq and seq.isdigit() else None,
                fields.get("event", "message"),
                data if isinstance(data, dict) else None,
            )
        )
    return events


@dataclass
class Follower:
    """``curl -N`` following run ``run_id``'s stream from ``base`` with ``token``;
    ``last_event_id``: a reconnecting client's ``Last-Event-ID`` (None: from the start)."""

    base: str
    run_id: str
    token: str
    workdir: Path
    last_event_id: int | None = None
    number: int = field(default_factory=lambda: next(_numbers))
    proc: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    """When it was opened (unix seconds)."""

    @property
    def body_file(self) -> Path:
        return self.workdir / f"stream{self.number}.body"

    @property
    def status_file(self) -> Path:
        return self.workdir / f"stream{self.number}.status"

    def start(self) -> Follower:
        """Open the stream (returns at once)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        argv = ["curl", "-sS", "-N", "-o", str(self.body_file), "-w", "%{http_code}"]
        argv += ["-H", f"Authorization: Bearer {self.token}"]
        if self.last_event_id is not None:
            argv += ["-H", f"Last-Event-ID: {self.last_event_id}"]
        argv.append(f"{self.base}/api/runs/{self.run_id}/events")
        self.started_at = time.time()
        with self.status_file.open("wb") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        return self

    @property
    def ended(self) -> bool:
        """The server ended the stream (curl exited)."""
        return self.proc is not None and self.proc.poll() is not None

    @property
    def status(self) -> int | None:
        """The HTTP status once ended (None before, or when curl could not connect)."""
        if not self.ended:
            return None
        text = self.status_file.read_text(errors="replace").strip()
        return int(text[-3:]) if text[-3:].isdigit() else None

    def body(self) -> str:
        """What the stream sent so far."""
        return self.body_file.read_text(errors="replace") if self.body_file.exists() else ""

    def events(self) -> list[SseEvent]:
        """The events received so far."""
        return parse_sse(self.body())

    def describe(self) -> str:
        """One line: which run, from where, its state, its last events."""
        kinds = [e.kind for e in self.events()][-4:]
        since = "start" if self.last_event_id is None else f"Last-Event-ID {self.last_event_id}"
        state = f"ended {self.status}" if self.ended else "open"
        return f"stream #{self.number} of run {self.run_id} (from {since}): {state}, last {kinds}"

    def stop(self) -> None:
        """End curl if the stream is still open (the journey is over)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
