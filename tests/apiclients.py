"""schemathesis hooks of tests/test_api_contract_served.py: many clients, not one.

Loaded by the ``schemathesis`` command that test starts (``SCHEMATHESIS_HOOKS=
tests.apiclients``), never imported by a test. Each TCP connection schemathesis
opens comes from its own loopback address (127.0.0.2, 127.0.0.3, ...; the test
sends ``Connection: close``, so one request is one connection).

Why: the inbox answers 429 to a client address for a minute after 10 failed
sign-ins (:mod:`converge.web.limits`), and schemathesis's probes of the auth
(``ignored_auth``, the coverage phase's missing ``Authorization``) are failures
by design. From one address, most of a run was answered 429 and never reached a
route (issue 53); from many, as a server with many users sees them, every route
is reached and the limit is still the server's own.
"""

from __future__ import annotations

import itertools
import socket
from collections.abc import Iterator, Sequence
from typing import Any

import urllib3.util.connection as connection


def _loopback_addresses() -> Iterator[str]:
    for n in itertools.count(2):
        yield f"127.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}"


_ADDRESSES = _loopback_addresses()
_CREATE = connection.create_connection


def _from_an_address_of_its_own(
    address: tuple[str, int],
    timeout: Any = connection._DEFAULT_TIMEOUT,
    source_address: tuple[str, int] | None = None,
    socket_options: Sequence[tuple[int, int, int | bytes]] | None = None,
) -> socket.socket:
    """urllib3's ``create_connection``, bound to the next loopback address."""
    return _CREATE(address, timeout, source_address or (next(_ADDRESSES), 0), socket_options)


connection.create_connection = _from_an_address_of_its_own
