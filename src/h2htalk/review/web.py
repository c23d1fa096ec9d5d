"""The desk's pages as HTML: its templates (autoescaped, every invisible character made visible), its cookies, the
headers every answer carries, and the warning every page of a desk serving plain HTTP on a network shows."""

from __future__ import annotations

import json
from contextvars import ContextVar
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from h2htalk.desk_store.tasks import TASKS, pattern
from h2htalk.review.visible import json_escaped, visible

HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; font-src 'self'; img-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",  # "no-referrer" would make the browser send "Origin: null"
}


def resources_folder() -> Path:
    return Path(str(resources.files("h2htalk.resources").joinpath("review")))


def _shown(value: Any) -> Any:
    """What a template writes for ``value``: text with its invisible characters made visible (then escaped);
    markup the templates made themselves as it is."""
    return visible(value) if isinstance(value, str) and not isinstance(value, Markup) else value


@cache
def templates() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(resources_folder() / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        finalize=_shown,
    )
    # for a text box a rater edits: Chinese as itself (jinja's tojson writes \u escapes), invisible characters as
    # their escapes (the same JSON, so unedited fields read back as they were shown), escaped as any text
    env.filters["pretty_json"] = lambda value: json_escaped(json.dumps(value, ensure_ascii=False, indent=2))
    env.filters["pattern"] = pattern
    return env


# the warning of the desk that answers the request, if it has one (set per request by ``PageWarning``)
WARNING: ContextVar[str | None] = ContextVar("desk_warning", default=None)


class PageWarning:
    """ASGI middleware: every page of this desk shows ``text`` at its top."""

    def __init__(self, app: ASGIApp, text: str) -> None:
        self.app, self.text = app, text

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        token = WARNING.set(self.text)
        try:
            await self.app(scope, receive, send)
        finally:
            WARNING.reset(token)


def page(template: str, status: int = 200, **context: Any) -> HTMLResponse:
    html = templates().get_template(template).render(tasks=TASKS, warning=WARNING.get(), **context)
    return HTMLResponse(html, status_code=status)


def set_cookie(response: Response, name: str, value: str, max_age: int, *, secure: bool) -> None:
    """A cookie scripts cannot read, sent only to this site, and with ``secure`` only over TLS."""
    response.set_cookie(name, value, max_age=max_age, httponly=True, samesite="strict", path="/", secure=secure)


def same_origin(request: Request, origin: str | None = None) -> bool:
    """Whether the request's Origin, if it has one, is the desk's: ``origin`` (where raters reach it through a
    proxy or tunnel), or else the scheme and host the request was made to."""
    sent = request.headers.get("origin")
    return sent is None or sent == (origin or f"{request.url.scheme}://{request.url.netloc}")
