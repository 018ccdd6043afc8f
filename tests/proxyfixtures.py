"""A real reverse proxy in front of several ``converge serve``: Debian's nginx, started by
the test on 127.0.0.1 with the configuration of docs/scale-out.md (:data:`SITE`: round
robin over the servers, streams unbuffered, ``X-Forwarded-For`` appended), stopped after.

``make test`` installs nginx as root when it is missing; under ``CI`` a missing nginx
fails the test, elsewhere it skips it.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.realserve import ROOT, free_port

__all__ = ["NGINX", "SITE", "nginx_in_front", "site_config"]

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
SITE = ROOT / "docs" / "scale-out" / "nginx.conf"
"""The proxy's configuration as docs/scale-out.md shows it (round robin over the
servers, streams unbuffered, ``X-Forwarded-For`` appended, ``X-Upstream`` naming the
server that answered): the tests run this file, so the page cannot drift from them."""
MAIN = """\
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
{site}
}}
"""
"""What a test's nginx adds around :data:`SITE`: its files under the test's directory."""
_SERVERS = re.compile(r"^( *)server 127\.0\.0\.1:\d+( [^;]*)?;\n", re.M)


def site_config(bases: list[str], port: int) -> str:
    """:data:`SITE` with the servers ``bases`` (``http://host:port``, same options as
    the page's) and listening on 127.0.0.1:``port``."""
    text = SITE.read_text()
    found = list(_SERVERS.finditer(text))
    assert found, f"{SITE} names no server 127.0.0.1:PORT"
    indent, options = found[0].group(1), found[0].group(2) or ""
    servers = "".join(f"{indent}server {b.removeprefix('http://')}{options};\n" for b in bases)
    text = text[: found[0].start()] + servers + text[found[-1].end() :]
    assert "listen 127.0.0.1:8080;" in text
    return text.replace("listen 127.0.0.1:8080;", f"listen 127.0.0.1:{port};")


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
    conf = root / "nginx.conf"
    conf.write_text(MAIN.format(root=root, site=site_config(bases, port)))
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
