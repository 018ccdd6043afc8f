"""A stand-in for the local model server, started as its own process:
``python -m tests.fake_model_server --host H --port P --model_alias NAME``.

It answers ``GET /v1/models`` with ``NAME`` and ``POST /v1/chat/completions``
with a tool call of the request's first tool other than ``final_result``
(arguments ``{"query": "MIT"}``; 100 prompt and 10 completion tokens) or, with no
such tool, the text ``pong``. It logs a line per request to stderr, the first
naming its pid; with ``--crash-on-chat`` it kills itself with SIGSEGV on the first
chat request (as llama.cpp's AMX path did). Put it in ``converge model serve``'s
place with ``$CONVERGE_MODEL_SERVER``: :data:`COMMAND`.

For the tests of what is asked of a model server (tests/test_seams_models.py):
``--answer JSON`` answers a request whose only tool is ``final_result`` (a
structured output) with a call of it with those arguments; ``--digest`` answers a
request without tools with the text ``re-`` and the first 12 hex digits of the
SHA-256 of its messages (another question, another answer); ``--hold-at N`` never
answers the Nth chat request (a generation that does not end); ``GET /calls`` says
how many chat requests it ``received`` and ``answered``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

COMMAND = (
    f"{sys.executable} -m tests.fake_model_server --host {{host}} --port {{port}} "
    "--model_alias {alias}"
)
"""``$CONVERGE_MODEL_SERVER`` for this server (run from the repository's root)."""


@dataclass
class Script:
    """What the server answers besides its defaults, and what it counted (see the
    module docstring)."""

    final: str | None = None
    digest: bool = False
    hold_at: int = 0
    received: int = 0
    answered: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def _called(name: str, arguments: str) -> dict[str, Any]:
    call = {"name": name, "arguments": arguments}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "call_1", "type": "function", "function": call}],
    }


def answer(body: dict[str, Any], script: Script | None = None) -> dict[str, Any]:
    """The chat completion answering ``body`` (see the module docstring)."""
    script = script or Script()
    tools = [t["function"]["name"] for t in body.get("tools", [])]
    wanted = [t for t in tools if t != "final_result"]
    message: dict[str, Any] = {"role": "assistant", "content": "pong"}
    if wanted:
        message = _called(wanted[0], json.dumps({"query": "MIT"}))
    elif "final_result" in tools and script.final is not None:
        message = _called("final_result", script.final)
    elif script.digest and not tools:
        asked = json.dumps(body.get("messages", []), sort_keys=True).encode()
        message["content"] = "re-" + hashlib.sha256(asked).hexdigest()[:12]
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", ""),
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
    }


def handler(
    alias: str, crash_on_chat: bool, script: Script | None = None
) -> type[BaseHTTPRequestHandler]:
    """The request handler of a server of ``alias``."""
    script = script or Script()

    class Handler(BaseHTTPRequestHandler):
        # keep-alive, as llama-cpp-python's uvicorn: a client's pooled connections matter
        protocol_version = "HTTP/1.1"

        def _send(self, code: int, data: dict[str, Any]) -> None:
            raw = json.dumps(data).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_GET(self) -> None:
            if self.path.rstrip("/") == "/v1/models":
                self._send(200, {"object": "list", "data": [{"id": alias, "object": "model"}]})
            elif self.path.rstrip("/") == "/calls":
                with script.lock:
                    counts = {"received": script.received, "answered": script.answered}
                self._send(200, counts)
            else:
                self._send(404, {"detail": "Not Found"})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._send(404, {"detail": "Not Found"})
            elif crash_on_chat:
                sys.stderr.write("fake: about to fault\n")
                sys.stderr.flush()
                os.kill(os.getpid(), signal.SIGSEGV)
            else:
                with script.lock:
                    script.received += 1
                    held = script.received == script.hold_at
                if held:  # a generation that never ends
                    sys.stderr.write(f"fake: holding chat request {script.hold_at}\n")
                    sys.stderr.flush()
                    threading.Event().wait()
                self._send(200, answer(body, script))
                with script.lock:
                    script.answered += 1

        def log_message(self, format: str, *args: Any) -> None:
            sys.stderr.write(f"fake: {format % args}\n")
            sys.stderr.flush()

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model_alias", default="gemma3-270m")
    parser.add_argument("--crash-on-chat", action="store_true")
    parser.add_argument("--answer", default=None, help="final_result's arguments (JSON)")
    parser.add_argument("--digest", action="store_true", help="text answers by digest")
    parser.add_argument("--hold-at", type=int, default=0, help="never answer chat request N")
    args = parser.parse_args()
    script = Script(final=args.answer, digest=args.digest, hold_at=args.hold_at)
    server = ThreadingHTTPServer(
        (args.host, args.port), handler(args.model_alias, args.crash_on_chat, script)
    )
    sys.stderr.write(f"fake: pid {os.getpid()} serving {args.model_alias} on port {args.port}\n")
    sys.stderr.flush()
    server.serve_forever()


if __name__ == "__main__":
    main()
