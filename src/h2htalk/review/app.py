"""The desk's web page (Starlette): log in, see progress, rate one item at a time.

Security, as the desk is built:
- a rater logs in by name; with ``tokens`` (the desk bound to an address other than loopback) also with their
  token, and a session cookie (HttpOnly, SameSite=Strict) then names them: nobody writes anonymously;
- every form carries the session's CSRF token (the login form a double-submit one), and a request whose
  Origin is another site is refused;
- a rater opens and rates only the items assigned to them; every value is read by the sheet's own readers and
  checked against the task's rules, and the store refuses an item rated before or changed since it was shown;
- templates escape everything (autoescape), model text is shown as text, and the Content-Security-Policy lets
  only the desk's own script and style run, so nothing a model wrote can act as HTML;
- bound to loopback, only the loopback host names are answered (no DNS rebinding).
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from h2htalk.review.store import ReviewStore
from h2htalk.review.tasks import TASKS, Refused, form_values
from h2htalk.studies.judges import VIOLATIONS

SESSION_COOKIE, LOGIN_COOKIE = "desk_session", "desk_login"
SESSION_HOURS = 12
LOOPBACK_NAMES = ("127.0.0.1", "localhost")
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; font-src 'self'; img-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",  # "no-referrer" would make the browser send "Origin: null"
}


def _resources() -> Path:
    return Path(str(resources.files("h2htalk.resources").joinpath("review")))


@cache
def _templates() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(_resources() / "templates"), autoescape=True, undefined=jinja2.StrictUndefined
    )
    # for a text box a rater edits: Chinese as itself (jinja's tojson writes \u escapes), escaped as any text
    env.filters["pretty_json"] = lambda value: json.dumps(value, ensure_ascii=False, indent=2)
    return env


@dataclass
class Session:
    rater: str
    csrf: str
    started: float


class Sessions:
    """Logged-in raters, in memory: a restarted desk asks everyone to log in again, and loses no rating."""

    def __init__(self) -> None:
        self._by_id: dict[str, Session] = {}
        self._lock = threading.Lock()

    def start(self, rater: str) -> str:
        session_id = secrets.token_urlsafe(32)
        with self._lock:
            self._by_id[session_id] = Session(rater, secrets.token_urlsafe(32), time.time())
        return session_id

    def get(self, session_id: str | None) -> Session | None:
        with self._lock:
            session = self._by_id.get(session_id or "")
            if session and time.time() - session.started > SESSION_HOURS * 3600:
                del self._by_id[session_id]
                return None
            return session

    def end(self, session_id: str | None) -> None:
        with self._lock:
            self._by_id.pop(session_id or "", None)


def _cookie(response: Response, name: str, value: str, max_age: int) -> None:
    response.set_cookie(name, value, max_age=max_age, httponly=True, samesite="strict", path="/")


def _same_origin(request: Request) -> bool:
    origin = request.headers.get("origin")
    return origin is None or origin == f"{request.url.scheme}://{request.url.netloc}"


def font_file() -> str | None:
    """The Chinese font the page serves (the one pip installs for the figures): headless browsers without a
    system CJK font then still draw every character."""
    from h2htalk.figures.plots import packaged_cjk_font

    return packaged_cjk_font()


def desk_app(store_path: str, seed: int, *, tokens: bool, loopback: bool) -> Starlette:
    """The desk over the store at ``store_path``; ``tokens``: a rater needs their token to log in."""
    sessions = Sessions()

    def page(template: str, status: int = 200, **context: Any) -> HTMLResponse:
        html = _templates().get_template(template).render(tasks=TASKS, violations=VIOLATIONS, **context)
        return HTMLResponse(html, status_code=status)

    def refusal(session: Session | None, status: int, reason: str) -> HTMLResponse:
        return page(
            "message.html", status, title="Not stored", reason=reason,
            rater=session.rater if session else None, csrf=session.csrf if session else "",
        )  # fmt: skip

    def with_store(work: Any, *args: Any) -> Any:
        with ReviewStore(store_path) as store:
            return work(store, *args)

    async def login_form(request: Request) -> Response:
        if sessions.get(request.cookies.get(SESSION_COOKIE)):
            return RedirectResponse("/", 303)
        token = secrets.token_urlsafe(32)
        response = page("login.html", title="Log in", csrf=token, tokens=tokens, rater=None, failed=False)
        _cookie(response, LOGIN_COOKIE, token, 3600)
        return response

    async def login(request: Request) -> Response:
        form = await request.form()
        sent, expected = str(form.get("csrf", "")), request.cookies.get(LOGIN_COOKIE, "")
        if not expected or not secrets.compare_digest(sent, expected) or not _same_origin(request):
            return refusal(None, 403, "The login form has expired or came from another site: open it again.")
        rater, token = str(form.get("rater", "")).strip(), str(form.get("token", "")).strip()

        def known(store: ReviewStore) -> bool:
            if rater not in store.raters():
                return False
            return store.token_matches(rater, token) if (tokens or token) else True

        if not await run_in_threadpool(with_store, known):
            return page("login.html", 401, title="Log in", csrf=expected, tokens=tokens, rater=None, failed=True)
        response = RedirectResponse("/", 303)
        _cookie(response, SESSION_COOKIE, sessions.start(rater), SESSION_HOURS * 3600)
        response.delete_cookie(LOGIN_COOKIE, path="/")
        return response

    def session_of(request: Request) -> Session | None:
        return sessions.get(request.cookies.get(SESSION_COOKIE))

    def checked_post(request: Request, form: Any) -> tuple[Session | None, HTMLResponse | None]:
        """The session of a form's sender, or the refusal of a sender without one, without its CSRF token, or
        from another site."""
        session = session_of(request)
        if session is None:
            return None, refusal(None, 401, "You are not logged in.")
        if not secrets.compare_digest(str(form.get("csrf", "")), session.csrf) or not _same_origin(request):
            return None, refusal(session, 403, "The form did not come from this desk: open the page again.")
        return session, None

    async def logout(request: Request) -> Response:
        _, refused = checked_post(request, await request.form())
        if refused:
            return refused
        sessions.end(request.cookies.get(SESSION_COOKIE))
        response = RedirectResponse("/login", 303)
        response.delete_cookie(SESSION_COOKIE, path="/")
        return response

    async def home(request: Request) -> Response:
        session = session_of(request)
        if session is None:
            return RedirectResponse("/login", 303)
        progress = await run_in_threadpool(with_store, ReviewStore.progress)
        return page(
            "home.html", title="Progress", rater=session.rater, csrf=session.csrf, progress=progress,
            done=request.query_params.get("done"),
        )  # fmt: skip

    async def next_item(request: Request) -> Response:
        session = session_of(request)
        if session is None:
            return RedirectResponse("/login", 303)
        task = request.path_params["task"]
        if task not in TASKS:
            return refusal(session, 404, f"There is no task {task!r}.")
        queue = await run_in_threadpool(with_store, ReviewStore.queue, session.rater, task, seed)
        todo = [item for item, rated in queue if not rated]
        return RedirectResponse(f"/item/{todo[0]}" if todo else f"/?done={task}", 303)

    def item_view(store: ReviewStore, item_id: int, rater: str) -> dict[str, Any] | Refused:
        item = store.item(item_id)
        if item is None or not item.current:
            return Refused(f"There is no item {item_id} (or it has been replaced by a newer version).", 404)
        if not store.is_assigned(item_id, rater):
            return Refused(f"Item {item_id} is not assigned to you.", 403)
        queue = store.queue(rater, item.task, seed)
        position = [i for i, _ in queue].index(item_id)
        later = [i for i, rated in queue[position + 1 :] + queue[:position] if not rated]
        return {
            "item": item, "rating": store.rating(item_id, rater), "position": position + 1, "total": len(queue),
            "rated": sum(rated for _, rated in queue), "next": later[0] if later else None,
        }  # fmt: skip

    async def show_item(request: Request) -> Response:
        session = session_of(request)
        if session is None:
            return RedirectResponse("/login", 303)
        view = await run_in_threadpool(with_store, item_view, request.path_params["item_id"], session.rater)
        if isinstance(view, Refused):
            return refusal(session, view.status, str(view))
        return page("item.html", title="Rate", rater=session.rater, csrf=session.csrf, problem=None, **view)

    async def rate(request: Request) -> Response:
        form = await request.form()
        session, refused = checked_post(request, form)
        if refused:
            return refused
        item_id = request.path_params["item_id"]

        def store_rating(store: ReviewStore) -> None:
            item = store.item(item_id)
            if item is None:
                raise Refused(f"There is no item {item_id}.", 404)
            values = form_values(item.task, {k: str(v) for k, v in form.items()}, item.shown)
            store.rate(item_id, session.rater, str(form.get("item_hash", "")), values, "desk")

        try:
            await run_in_threadpool(with_store, store_rating)
        except Refused as exc:
            return refusal(session, exc.status, str(exc))
        return RedirectResponse(f"/item/{item_id}", 303)

    async def font(request: Request) -> Response:
        path = font_file()
        if path is None:
            return Response(status_code=404)
        return FileResponse(path, media_type="font/otf", headers={"Cache-Control": "max-age=86400"})

    async def security_headers(request: Request, call_next: Any) -> Response:
        response = await call_next(request)
        response.headers.update(HEADERS)
        response.headers.setdefault("Cache-Control", "no-store")
        return response

    middleware = [Middleware(BaseHTTPMiddleware, dispatch=security_headers)]
    if loopback:
        middleware.insert(0, Middleware(TrustedHostMiddleware, allowed_hosts=list(LOOPBACK_NAMES)))
    routes = [
        Route("/login", login_form, methods=["GET"]),
        Route("/login", login, methods=["POST"]),
        Route("/logout", logout, methods=["POST"]),
        Route("/", home, methods=["GET"]),
        Route("/next/{task}", next_item, methods=["GET"]),
        Route("/item/{item_id:int}", show_item, methods=["GET"]),
        Route("/item/{item_id:int}", rate, methods=["POST"]),
        Route("/font.otf", font, methods=["GET"]),
        Route("/favicon.ico", lambda request: Response(status_code=204), methods=["GET"]),
        Mount("/static", StaticFiles(directory=_resources() / "static"), name="static"),
    ]
    return Starlette(routes=routes, middleware=middleware)
