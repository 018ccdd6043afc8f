"""A real reverse proxy in front of several ``converge serve``: Debian's nginx, started by
the test on 127.0.0.1 with a configuration it writes (round robin over the servers,
streams unbuffered, ``X-Forwarded-For`` appended), stopped after.

``make test`` installs nginx as root when it is missing; under ``CI`` a missing nginx
fails the test, elsewhere it skips it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.realserve import free_port

__all__ = ["NGINX", "nginx_in_front"]

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
CONFIG = """\
worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log {root}/access.log;
    client_body_temp_path {root}/body;
    proxy_temp_path {root}/proxy;
    fastcgi_temp_path {root}/fastcgi;
    uwsgi_temp_path {root}/uwsgi;
    scgi_temp_path {root}/scgi;
    upstream inbox {{
{servers}
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://inbox;
            proxy_http_version 1.1;
            proxy_set_header Host $host;
            proxy_set_header Connection "";
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto $scheme;
            proxy_buffering off;
            proxy_read_timeout 3600s;
            proxy_next_upstream error timeout;
        }}
    }}
}}
"""
"""nginx's configuration: one upstream of the servers, Server-Sent Events passed
through as they come (no buffering), the client's address appended to
``X-Forwarded-For`` (the servers believe it from 127.0.0.1 only)."""


def _require_nginx() -> None:
    if os.path.exists(NGINX):
        return
    why = "nginx is not installed (make test installs Debian's nginx as root)"
    if os.environ.get("CI"):
        pytest.fail(why)
    pytest.skip(why)


@contextmanager
def nginx_in_front(bases: list[str], workdir: Path) -> Iterator[str]:
    """nginx on a free port of 127.0.0.1 proxying to ``bases`` (``http://host:port``)
    in turn; yields its base URL once it answers, stopped (SIGQUIT, then kill) after."""
    _require_nginx()
    root = workdir / "nginx"
    root.mkdir(parents=True, exist_ok=True)
    port = free_port()
    servers = "\n".join(f"        server {b.removeprefix('http://')};" for b in bases)
    conf = root / "nginx.conf"
    conf.write_text(CONFIG.format(root=root, servers=servers, port=port))
    proc = subprocess.Popen(
        [NGINX, "-c", str(conf), "-p", str(root), "-g", "daemon off;"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(base + "/login", timeout=2)
                break
            except httpx.HTTPError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(
                        "nginx did not start: " + (root / "error.log").read_text()
                    ) from None
                time.sleep(0.05)
        yield base
    finally:
        proc.send_signal(signal.SIGQUIT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
