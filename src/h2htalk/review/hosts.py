"""What the desk asks of raters and which Host headers it answers, by the address it listens on.

Only on 127.0.0.1, the default, does a rater log in by name alone. On any other address (another loopback one
such as 127.0.0.2 or ::1, a network address, all addresses) raters need their tokens. The desk answers only
requests that name the address it listens on (127.0.0.1 also as localhost), so a page elsewhere cannot reach it
through a name of its own (DNS rebinding); listening on all addresses, it answers any name, since a rater needs
a token there anyway.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

NAME_ONLY = "127.0.0.1"
EVERY_ADDRESS = ("0.0.0.0", "::", "")


def needs_tokens(host: str) -> bool:
    return host != NAME_ONLY


def is_loopback(host: str) -> bool:
    """Whether ``host`` is an address of this machine alone (127.0.0.0/8, ::1, localhost): what is sent to it
    never crosses a network."""
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _same(a: str, b: str) -> bool:
    try:
        return ipaddress.ip_address(a) == ipaddress.ip_address(b)
    except ValueError:
        return a.lower().rstrip(".") == b.lower().rstrip(".")


def allowed_hosts(host: str) -> tuple[str, ...] | None:
    """The names a request's Host header may give for a desk listening on ``host``; None: any."""
    if host in EVERY_ADDRESS:
        return None
    return (host, "localhost") if host == NAME_ONLY else (host,)


def host_of(header: str) -> str:
    """The host of a Host header, without its port and an IPv6 address's brackets."""
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else ""
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class HostCheck:
    """ASGI middleware: a request whose Host header names another host is answered 400."""

    def __init__(self, app: ASGIApp, allowed: tuple[str, ...]) -> None:
        self.app, self.allowed = app, allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            headers: dict[bytes, Any] = dict(scope["headers"])
            host = host_of(headers.get(b"host", b"").decode("latin-1"))
            if not any(_same(host, allowed) for allowed in self.allowed):
                await PlainTextResponse("Invalid host header", status_code=400)(scope, receive, send)
                return
        await self.app(scope, receive, send)
