"""A stand-in for the local model server, started as its own process:
``python -m tests.fake_model_server --host H --port P --model_alias NAME``.

It answers ``GET /v1/models`` with ``NAME`` and ``POST /v1/chat/completions``
with a tool call of the request's first tool other than ``final_result``
(arguments ``{"query": "MIT"}``; 100 prompt and 10 completion tokens) or, with no
such tool, the text ``pong``. It logs a line per request to stderr, the first
naming its pid; with ``--crash-on-chat`` it kills itself with SIGSEGV on the first
chat request (as llama.cpp's AMX path did). Put it in ``converge model serve``'s
place with ``$CONVERGE_MODEL_SERVER``: :data:`COMMAND`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

COMMAND = (
    f"{sys.executable} -m tests.fake_model_server --host {{host}} --port {{port}} "
    "--model_alias {alias}"
)
"""``$CONVERGE_MODEL_SERVER`` for this server (run from the repository's root)."""


def answer(body: dict[str, Any]) -> dict[str, Any]:
    """The chat completion answering ``body`` (see the module docstring)."""
    tools = [t["function"]["name"] for t in body.get("tools", [])]
    wanted = [t for t in tools if t != "final_result"]
    message: dict[str, Any] = {"role": "assistant", "content": "pong"}
    if wanted:
        call = {"name": wanted[0], "arguments": json.dumps({"query": "MIT"})}
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "call_1", "type": "function", "function": call}],
        }
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", ""),
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
    }


def handler(alias: str, crash_on_chat: bool) -> type[BaseHTTPRequestHandler]:
    """The request handler of a server of ``alias``."""

    class Handler(BaseHTTPRequestHandler):
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
                self._send(200, answer(body))

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
    args = parser.parse_args()
    server = ThreadingHTTPServer(
        (args.host, args.port), handler(args.model_alias, args.crash_on_chat)
    )
    sys.stderr.write(f"fake: pid {os.getpid()} serving {args.model_alias} on port {args.port}\n")
    sys.stderr.flush()
    server.serve_forever()


if __name__ == "__main__":
    main()
