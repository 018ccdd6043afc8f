"""Tokens per second and time to first answer of the packaged local model.

``python -m benchmarks.local_model_speed [THREADS]`` (extra ``local``): starts
:class:`~converge.agents.local.LocalModelServer` (llama.cpp's extra buffer types
off, as ``converge model serve`` runs it) on a free port with ``THREADS`` CPU
threads (default: all), prints how long it took to answer ``GET /v1/models``,
then, for :data:`CALLS` streamed chat completions of one prompt (``max_tokens``
128, temperature 0), the time to the first token, the total and the tokens per
second after the first; then one non-streamed completion with the server's usage.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.request
from typing import Any

from converge.agents.local import LocalModelServer

CALLS = 6
PROMPT = "Name three prime numbers and explain briefly why each is prime."


def _request(base_url: str, stream: bool) -> urllib.request.Request:
    body = {
        "model": "gemma3-270m",
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": 128,
        "temperature": 0.0,
        "stream": stream,
    }
    return urllib.request.Request(
        base_url + "/chat/completions",
        json.dumps(body).encode(),
        {"Content-Type": "application/json"},
    )


def streamed(base_url: str) -> tuple[float, float, int]:
    """Seconds to the first content chunk, seconds in all, content chunks (tokens)."""
    start = time.perf_counter()
    first: float | None = None
    tokens = 0
    with urllib.request.urlopen(_request(base_url, True), timeout=600) as r:
        for line in r:
            if not line.startswith(b"data: ") or b"[DONE]" in line:
                continue
            if json.loads(line[6:])["choices"][0]["delta"].get("content"):
                tokens += 1
                first = time.perf_counter() - start if first is None else first
    return first or 0.0, time.perf_counter() - start, tokens


def main(threads: int | None = None) -> None:
    """Measure and print (see the module docstring)."""
    start = time.perf_counter()
    server = LocalModelServer(0, threads=threads).start()
    try:
        server.wait_ready(300)
        print(f"server answering after {time.perf_counter() - start:.2f} s")
        for i in range(CALLS):
            ttft, total, tokens = streamed(server.base_url)
            rate = (tokens - 1) / (total - ttft) if total > ttft else 0.0
            print(
                f"call {i}: first token {ttft * 1000:.0f} ms, total {total * 1000:.0f} ms, "
                f"{tokens} tokens, {rate:.1f} tokens/s after the first"
            )
        t = time.perf_counter()
        with urllib.request.urlopen(_request(server.base_url, False), timeout=600) as r:
            usage: dict[str, Any] = json.load(r)["usage"]
        took = time.perf_counter() - t
        print(
            f"non-streamed: {took * 1000:.0f} ms, usage {usage}, "
            f"{usage['completion_tokens'] / took:.1f} completion tokens/s"
        )
    finally:
        server.stop()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else None)
