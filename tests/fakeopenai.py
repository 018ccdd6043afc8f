"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1, for the tests
of models that misbehave on purpose (tests/test_bad_models.py), and a recording
proxy in front of a real one (tests/test_local_model.py).

:class:`FakeOpenAI` answers ``POST /v1/chat/completions`` with its replies in
order (a JSON body, :class:`Hang` or :class:`Status`), records each request body
and the usage it returned, and runs uvicorn in a thread on a socket bound before
the thread starts (so no wait for readiness). With ``models``, it lists them at
``GET /v1/models`` (counting the requests in ``listings``); without, that is a 404
as on a server that lists nothing. With ``upstream=URL`` it forwards every request
there instead and records the upstream's answers.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from converge.agents.local import free_port

__all__ = ["FakeOpenAI", "Hang", "Status", "completion", "fake_openai", "free_port"]


@dataclass
class Hang:
    """A reply that never comes: the request waits until its client disconnects
    (``disconnected`` is set then) or the server closes."""

    disconnected: threading.Event = field(default_factory=threading.Event)


@dataclass
class Status:
    """An HTTP error reply."""

    code: int
    body: dict[str, Any]


def completion(
    content: str | None = None,
    *,
    tool: str | None = None,
    arguments: str = "{}",
    prompt_tokens: int = 100,
    completion_tokens: int = 10,
    cost: str | None = None,
    model: str = "fake",
) -> dict[str, Any]:
    """A chat completion: text ``content``, or a call of ``tool`` with ``arguments``
    (raw JSON text, sent as is), with exact usage; ``cost`` (USD, a decimal
    string) is the cost the response itself reports (as a gateway does)."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool is not None:
        message["tool_calls"] = [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": tool, "arguments": arguments},
            }
        ]
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if cost is not None:
        usage["logfire_ai_gateway"] = {"cost": cost}
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if tool else "stop",
            }
        ],
        "usage": usage,
    }


Reply = dict[str, Any] | Hang | Status


class FakeOpenAI:
    """The server (see the module docstring). ``url`` is its base URL (``.../v1``);
    ``requests`` the JSON bodies received, ``usages`` the ``usage`` of each
    completion answered (through ``upstream``: of each request, ``{}`` when the
    answer had none), ``authorization`` the Authorization header of each."""

    def __init__(
        self,
        replies: list[Reply] | None = None,
        upstream: str | None = None,
        models: list[str] | None = None,
    ) -> None:
        self.replies = list(replies or [])
        self.models = models
        self.listings = 0
        self.upstream = upstream
        self.requests: list[dict[str, Any]] = []
        self.usages: list[dict[str, Any]] = []
        self.authorization: list[str | None] = []
        self.closing = threading.Event()
        self.app = FastAPI()
        self.app.post("/v1/chat/completions")(self._chat)
        if models is not None:
            self.app.get("/v1/models")(self._models)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        config = uvicorn.Config(self.app, log_level="error", timeout_graceful_shutdown=1)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    async def _chat(self, request: Request) -> Any:
        body = await request.json()
        self.requests.append(body)
        self.authorization.append(request.headers.get("authorization"))
        if self.upstream is not None:
            async with httpx.AsyncClient(timeout=600) as client:
                r = await client.post(f"{self.upstream}/chat/completions", json=body)
            data = r.json()
            self.usages.append(data.get("usage", {}) if isinstance(data, dict) else {})
            return JSONResponse(data, status_code=r.status_code)
        if not self.replies:
            return JSONResponse({"error": {"message": "no reply scripted"}}, status_code=500)
        reply = self.replies.pop(0)
        if isinstance(reply, Hang):
            while not self.closing.is_set():  # a generation that never ends
                if await request.is_disconnected():
                    reply.disconnected.set()
                    break
                await asyncio.sleep(0.01)
            return JSONResponse({"error": {"message": "gone"}}, status_code=499)
        if isinstance(reply, Status):
            return JSONResponse(reply.body, status_code=reply.code)
        self.usages.append(reply["usage"])
        return JSONResponse(reply)

    async def _models(self) -> Any:
        self.listings += 1
        data = [{"id": name, "object": "model", "owned_by": "me"} for name in self.models or []]
        return JSONResponse({"object": "list", "data": data})

    def start(self) -> FakeOpenAI:
        """Serve in a thread (connections made before it runs wait in the backlog)."""
        self.thread.start()
        return self

    def stop(self) -> None:
        """End hanging replies and the server; wait for its thread."""
        self.closing.set()
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()


@contextmanager
def fake_openai(
    replies: list[Reply] | None = None,
    upstream: str | None = None,
    models: list[str] | None = None,
) -> Iterator[FakeOpenAI]:
    """A started :class:`FakeOpenAI`, stopped at the end of the block."""
    server = FakeOpenAI(replies, upstream, models).start()
    try:
        yield server
    finally:
        server.stop()
