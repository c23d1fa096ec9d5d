"""The desk's web page (Starlette): log in, see progress, rate one item at a time.

Security, as the desk is built:
- a rater logs in by name; with ``tokens`` (the desk listening on any address but 127.0.0.1, or reached through
  a proxy or tunnel, see ``hosts``) also with their token, and a session cookie (HttpOnly, SameSite=Strict, and
  Secure whenever raters reach the desk over TLS) then names them: nobody writes anonymously; sessions are kept
  beside the store (``sessions``): a restart keeps them, a new token for the rater ends them;
- who is logged in is checked before a form is read, and a form's body is counted as it arrives and refused past
  its limit (``forms``): an unknown sender's at 32 KB; a free-text field over its limit is refused on the item's
  page, the rater's text kept in its box;
- every form carries the session's CSRF token (the login form a double-submit one), and a request whose
  Origin is another site is refused;
- a rater opens and rates only the items assigned to them, and that is checked first: an item of another rater
  is refused alike whatever was sent for it. Every value must be one the form offers, read by the sheet's own
  readers and checked against the task's rules, and the store refuses an item rated before or changed since it
  was shown;
- a rating sent after the session ended is not lost: the login page keeps it, shows it, and stores it once the
  rater who typed it has logged in again; if anyone else logs in there, it is discarded, and they are told so;
- templates escape everything (autoescape) and show invisible characters as visible tokens, model text is shown
  as text, and the Content-Security-Policy lets only the desk's own script and style run, so nothing a model
  wrote can act as HTML or reorder the page;
- only requests naming the address the desk listens on are answered (no DNS rebinding).
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from h2htalk.desk_store.store import ReviewStore, StoredItem
from h2htalk.desk_store.tasks import TASKS, Refused, form_values
from h2htalk.review.forms import ANONYMOUS_BYTES, FIELD_CHARS, FORM_BYTES, FormRefused, kilobytes, read_form
from h2htalk.review.hosts import HostCheck, allowed_hosts, host_of, needs_tokens
from h2htalk.review.sessions import SESSION_HOURS, Session, Sessions
from h2htalk.review.web import HEADERS, PageWarning, page, resources_folder, same_origin, set_cookie

SESSION_COOKIE, LOGIN_COOKIE = "desk_session", "desk_login"
PENDING = "rating."  # the prefix of a pending rating's values on the login form
VALUE_COLUMNS = sorted({f.column for task in TASKS.values() for f in task.sheet.values})
T = TypeVar("T")


@dataclass(frozen=True)
class Desk:
    """What the routes share: the store, the seed of the raters' orders, whether raters need tokens, the sessions,
    whether cookies are sent only over TLS, and the origin raters reach the desk at through a proxy or tunnel
    (None: the address it listens on)."""

    store_path: str
    seed: int
    tokens: bool
    sessions: Sessions
    secure: bool = False
    origin: str | None = None

    def same_origin(self, request: Request) -> bool:
        return same_origin(request, self.origin)

    def set_cookie(self, response: Response, name: str, value: str, max_age: int) -> None:
        set_cookie(response, name, value, max_age, secure=self.secure)

    def delete_cookie(self, response: Response, name: str) -> None:
        response.delete_cookie(name, path="/", secure=self.secure, httponly=True, samesite="strict")

    async def session_of(self, request: Request) -> Session | None:
        """The sender's session, looked up before anything of their form is read."""
        return await run_in_threadpool(self.with_store, lambda store: self.session(store, request))

    def with_store(self, work: Callable[[ReviewStore], T]) -> T:
        with ReviewStore(self.store_path, check_pages=False) as store:  # checked when desk-serve started
            return work(store)

    def session(self, store: ReviewStore, request: Request) -> Session | None:
        """The sender's session: one that has not ended, of a rater whose token is the one it started with."""
        session_id = request.cookies.get(SESSION_COOKIE)
        session = self.sessions.get(session_id)
        if session is not None and store.credential(session.rater) != session.credential:
            self.sessions.end(session_id)
            return None
        return session


def desk_of(request: Request) -> Desk:
    return request.app.state.desk


def refusal(session: Session | None, status: int, reason: str) -> HTMLResponse:
    return page(
        "message.html", status, title="Not stored", reason=reason,
        rater=session.rater if session else None, csrf=session.csrf if session else "",
    )  # fmt: skip


def login_page(
    desk: Desk, status: int = 200, *, failed: bool = False, pending: SentRating | None = None, problem: str = ""
) -> Response:
    """The login form with a fresh double-submit CSRF token (in its cookie and in the form); ``pending``: a
    rating the form carries, to store once the rater who typed it has logged in; ``problem``: what went wrong."""
    token = secrets.token_urlsafe(32)
    response = page(
        "login.html", status, title="Log in", csrf=token, tokens=desk.tokens, rater=None, failed=failed,
        pending=pending, prefix=PENDING, problem=problem,
    )  # fmt: skip
    desk.set_cookie(response, LOGIN_COOKIE, token, 3600)
    return response


def unread(response: Response) -> Response:
    """``response`` to a request whose body was not read to its end: the connection closes after it, so the rest
    of the body is never read (the server would otherwise read and discard it, to take the next request)."""
    response.headers["Connection"] = "close"
    return response


def assigned_item(store: ReviewStore, item_id: int, rater: str) -> StoredItem:
    """The item, if it is there and assigned to ``rater``, or Refused: whether another rater's item is current,
    or of which task, is not told."""
    item = store.item(item_id)
    if item is None:
        raise Refused(f"There is no item {item_id}.", 404)
    if not store.is_assigned(item_id, rater):
        raise Refused(f"Item {item_id} is not assigned to you.", 403)
    return item


@dataclass(frozen=True)
class SentRating:
    """A rating as a form sent it: the item, its hash as the rater saw it, the values given, as text, and the
    rater whose page it was sent from (the item's page names them)."""

    item: int
    item_hash: str
    values: dict[str, str]
    rater: str

    @classmethod
    def of(cls, form: FormData, item: int, prefix: str = "") -> SentRating:
        """The rating in ``form`` (its fields' names begin with ``prefix``)."""
        values = {column: str(form[prefix + column]) for column in VALUE_COLUMNS if form.get(prefix + column)}
        return cls(item, str(form.get(prefix + "item_hash", "")), values, str(form.get(prefix + "rater", "")))

    def too_long(self) -> str | None:
        """The field over FIELD_CHARS, if one is (only free text can be: every other value is a short choice)."""
        return next((column for column, text in self.values.items() if len(text) > FIELD_CHARS), None)

    def store(self, store: ReviewStore, rater: str) -> None:
        """Store it as ``rater``'s: the item assigned to them first, then the values; or Refused."""
        shown = assigned_item(store, self.item, rater)
        store.rate(self.item, rater, self.item_hash, form_values(shown.task, self.values, shown.shown), "desk")


def checked_post(desk: Desk, store: ReviewStore, request: Request, form: FormData) -> Session | Response:
    """The session of a form's sender, or the refusal of a form without its session's CSRF token or from another
    site (401 without a session)."""
    session = desk.session(store, request)
    if session is None:
        return refusal(None, 401, "You are not logged in.")
    if not secrets.compare_digest(str(form.get("csrf", "")), session.csrf) or not desk.same_origin(request):
        return refusal(session, 403, "The form did not come from this desk: open the page again.")
    return session


# --- routes ----------------------------------------------------------------------------------------------------


def login_form(request: Request) -> Response:
    desk = desk_of(request)
    if desk.with_store(lambda store: desk.session(store, request)):
        return RedirectResponse("/", 303)
    return login_page(desk)


async def login(request: Request) -> Response:
    """Log a rater in; a rating the form carries (sent when their session had ended) is then stored, if it is
    theirs, and discarded, saying so, if it is another rater's."""
    desk = desk_of(request)
    try:
        form = await read_form(request, ANONYMOUS_BYTES)
    except FormRefused as exc:
        return unread(refusal(None, exc.status, str(exc)))
    sent, expected = str(form.get("csrf", "")), request.cookies.get(LOGIN_COOKIE, "")
    if not expected or not secrets.compare_digest(sent, expected) or not desk.same_origin(request):
        return refusal(None, 403, "The login form has expired or came from another site: open it again.")
    rater, token = str(form.get("rater", "")).strip(), str(form.get("token", "")).strip()
    item = str(form.get(PENDING + "item", ""))
    pending = SentRating.of(form, int(item), PENDING) if item.isascii() and item.isdigit() else None

    def log_in(store: ReviewStore) -> Response:
        credential = store.credential(rater)
        if credential is None or ((desk.tokens or token) and not store.token_matches(rater, token)):
            return login_page(desk, 401, failed=True, pending=pending)
        session_id = desk.sessions.start(rater, credential)
        response: Response = RedirectResponse("/", 303)
        if pending is not None and pending.rater != rater:
            typed = f"typed by {pending.rater}" if pending.rater else "typed by a rater the page did not name"
            response = refusal(
                desk.sessions.get(session_id), 409,
                f"The rating of item {pending.item} waiting on that page ({typed}) was discarded, not saved: a "
                f"rating is saved only for the rater who typed it, and you logged in as {rater}.",
            )  # fmt: skip
        elif pending is not None:
            try:
                pending.store(store, rater)
                response = RedirectResponse(f"/item/{pending.item}", 303)
            except Refused as exc:
                response = refusal(desk.sessions.get(session_id), exc.status, str(exc))
        desk.set_cookie(response, SESSION_COOKIE, session_id, SESSION_HOURS * 3600)
        desk.delete_cookie(response, LOGIN_COOKIE)
        return response

    return await run_in_threadpool(desk.with_store, log_in)


async def logout(request: Request) -> Response:
    desk = desk_of(request)
    if await desk.session_of(request) is None:
        return unread(refusal(None, 401, "You are not logged in."))
    try:
        form = await read_form(request, ANONYMOUS_BYTES)
    except FormRefused as exc:
        return unread(refusal(None, exc.status, str(exc)))

    def end(store: ReviewStore) -> Response:
        checked = checked_post(desk, store, request, form)
        if isinstance(checked, Response):
            return checked
        desk.sessions.end(request.cookies.get(SESSION_COOKIE))
        response = RedirectResponse("/login", 303)
        desk.delete_cookie(response, SESSION_COOKIE)
        return response

    return await run_in_threadpool(desk.with_store, end)


def rater_page(render: Callable[[Desk, ReviewStore, Session, Request], Response]) -> Callable[[Request], Response]:
    """A page for a logged-in rater: ``render`` with the store and the rater's session; anyone else is sent to log
    in. (A plain function: Starlette runs it in a worker thread, as the store's calls block.)"""

    @functools.wraps(render)
    def route(request: Request) -> Response:
        desk = desk_of(request)
        with ReviewStore(desk.store_path, check_pages=False) as store:
            session = desk.session(store, request)
            return RedirectResponse("/login", 303) if session is None else render(desk, store, session, request)

    return route


@rater_page
def home(desk: Desk, store: ReviewStore, session: Session, request: Request) -> Response:
    return page(
        "home.html", title="Progress", rater=session.rater, csrf=session.csrf, progress=store.progress(),
        done=request.query_params.get("done"),
    )  # fmt: skip


@rater_page
def next_item(desk: Desk, store: ReviewStore, session: Session, request: Request) -> Response:
    task = request.path_params["task"]
    if task not in TASKS:
        return refusal(session, 404, f"There is no task {task!r}.")
    todo = [item for item, rated in store.queue(session.rater, task, desk.seed) if not rated]
    return RedirectResponse(f"/item/{todo[0]}" if todo else f"/?done={task}", 303)


@rater_page
def show_item(desk: Desk, store: ReviewStore, session: Session, request: Request) -> Response:
    return item_page(desk, store, session, request.path_params["item_id"])


def item_page(
    desk: Desk,
    store: ReviewStore,
    session: Session,
    item_id: int,
    *,
    sent: SentRating | None = None,
    problem: str = "",
    status: int = 200,
) -> Response:
    """An item's page for the rater; with ``sent``, the form holds the rating they sent (kept, not stored) and
    ``problem`` says why it was not stored."""
    try:
        item = assigned_item(store, item_id, session.rater)
    except Refused as exc:
        return refusal(session, exc.status, str(exc))
    if not item.current:
        return refusal(session, 404, f"Item {item_id} has been replaced by a newer version.")
    queue = store.queue(session.rater, item.task, desk.seed)
    position = [i for i, _ in queue].index(item_id)
    later = [i for i, rated in queue[position + 1 :] + queue[:position] if not rated]
    return page(
        "item.html", status, title="Rate", rater=session.rater, csrf=session.csrf, item=item,
        rating=store.rating(item_id, session.rater), position=position + 1, total=len(queue),
        rated=sum(rated for _, rated in queue), next=later[0] if later else None, kept=sent.values if sent else {},
        problem=problem, field_chars=FIELD_CHARS,
    )  # fmt: skip


async def rate(request: Request) -> Response:
    """Store a rating; sent without a session (it ended, or the rater was logged out), it is kept on the login
    page and stored once they log in again. Whether the sender is logged in decides how much of the form is
    read at all."""
    desk, item_id = desk_of(request), request.path_params["item_id"]
    if not desk.same_origin(request):
        return unread(refusal(None, 403, "The form did not come from this desk: open the page again."))
    session = await desk.session_of(request)
    try:
        form = await read_form(request, FORM_BYTES if session else ANONYMOUS_BYTES)
    except FormRefused as exc:
        if session or exc.status != 413:
            return unread(refusal(session, exc.status, str(exc)))
        return unread(login_page(desk, 401, problem=(
            f"You were logged out, and your rating was too long to keep here ({kilobytes(ANONYMOUS_BYTES)}): log "
            "in, then go back to the item's page (your browser's Back button keeps what you typed) and save it again."
        )))  # fmt: skip
    rating = SentRating.of(form, item_id)

    def save(store: ReviewStore) -> Response:
        checked = checked_post(desk, store, request, form)
        if isinstance(checked, Response):
            return login_page(desk, 401, pending=rating) if checked.status_code == 401 else checked
        if (column := rating.too_long()) is not None:
            size = len(rating.values[column])
            return item_page(desk, store, checked, item_id, sent=rating, status=413, problem=(
                f"Not saved: {column} has {size:,} characters, more than the desk takes ({FIELD_CHARS:,}). Your "
                "text is kept below: shorten it, or drop the item and say why to whoever runs the study."
            ))  # fmt: skip
        try:
            rating.store(store, checked.rater)
        except Refused as exc:
            return refusal(checked, exc.status, str(exc))
        return RedirectResponse(f"/item/{item_id}", 303)

    return await run_in_threadpool(desk.with_store, save)


def font(request: Request) -> Response:
    from h2htalk.figures.plots import packaged_cjk_font

    # the Chinese font pip installs for the figures: headless browsers without a system CJK font still draw
    # every character
    path = packaged_cjk_font()
    if path is None:
        return Response(status_code=404)
    return FileResponse(path, media_type="font/otf", headers={"Cache-Control": "max-age=86400"})


async def security_headers(request: Request, call_next: Any) -> Response:
    response = await call_next(request)
    response.headers.update(HEADERS)
    response.headers.setdefault("Cache-Control", "no-store")
    return response


ROUTES = [
    Route("/login", login_form, methods=["GET"]),
    Route("/login", login, methods=["POST"]),
    Route("/logout", logout, methods=["POST"]),
    Route("/", home, methods=["GET"]),
    Route("/next/{task}", next_item, methods=["GET"]),
    Route("/item/{item_id:int}", show_item, methods=["GET"]),
    Route("/item/{item_id:int}", rate, methods=["POST"]),
    Route("/font.otf", font, methods=["GET"]),
    Route("/favicon.ico", lambda request: Response(status_code=204), methods=["GET"]),
]


def desk_app(
    store_path: str, seed: int, *, host: str, tls: bool = False, public_url: str | None = None, warning: str = ""
) -> Starlette:
    """The desk over the store at ``store_path``, listening on ``host``: that decides whether raters need tokens
    and which Host headers are answered (``hosts``). ``tls``: it serves HTTPS itself; ``public_url``: raters
    reach it there, through a proxy or tunnel on this machine (then they need tokens, only that host is
    answered, and cookies need TLS if the URL is https); ``warning``: shown on every page."""
    middleware = [Middleware(BaseHTTPMiddleware, dispatch=security_headers)]
    public = urlsplit(public_url) if public_url else None
    allowed = (host_of(public.netloc),) if public else allowed_hosts(host)
    if allowed is not None:
        middleware.insert(0, Middleware(HostCheck, allowed=allowed))
    if warning:
        middleware.insert(0, Middleware(PageWarning, text=warning))
    routes = [*ROUTES, Mount("/static", StaticFiles(directory=resources_folder() / "static"), name="static")]
    app = Starlette(routes=routes, middleware=middleware)
    app.state.desk = Desk(
        store_path, seed, needs_tokens(host) or public is not None, Sessions(store_path),
        secure=tls or (public is not None and public.scheme == "https"),
        origin=f"{public.scheme}://{public.netloc}" if public else None,
    )  # fmt: skip
    return app
