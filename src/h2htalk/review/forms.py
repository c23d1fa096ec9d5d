"""Reading the desk's forms within limits: a body is counted as it streams in and refused once it passes its limit
(at once where its Content-Length says so), before anything is parsed; only then is it read as a URL-encoded
form. Who is logged in decides the limit, so an unknown sender costs the desk at most ANONYMOUS_BYTES."""

from __future__ import annotations

from urllib.parse import parse_qsl

from starlette.datastructures import FormData
from starlette.requests import Request

# a login, or a rating kept while its rater logs in again: a few short values
ANONYMOUS_BYTES = 32 * 1024
# a rating from a session: an edit of an instance's fields far over FIELD_CHARS (a megabyte) still comes back on
# the item's page, kept; the page's script holds back anything longer before it is sent
FORM_BYTES = 2 * 1024 * 1024
# a free-text field (an instance's fields as JSON): the demo's are about 100 characters, a long one a few thousand
FIELD_CHARS = 20_000
MAX_FIELDS = 32


class FormRefused(ValueError):
    """A form the desk does not read, and why; ``status``: the HTTP status the page answers with."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def kilobytes(size: int) -> str:
    return f"{size // 1024} KB"


def too_large(limit: int) -> FormRefused:
    # made where it is raised, never held in a local of the frame that raises it: that would make a reference
    # cycle (exception, traceback, frame) holding the request's connection, its TLS buffers and the body read so
    # far until the cyclic garbage collector runs, which a flood of refused posts outpaces
    return FormRefused(
        f"Nothing was saved: the form is larger than the desk takes ({kilobytes(limit)}). Go back (your browser's "
        "Back button keeps what you typed) and shorten it.",
        413,
    )


async def read_form(request: Request, limit: int) -> FormData:
    """The request's URL-encoded form, its body at most ``limit`` bytes; or FormRefused (413 over the limit)."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        raise FormRefused("The desk reads only its own forms (URL-encoded).", 415)
    declared = request.headers.get("content-length", "")
    if declared and (not declared.isdigit() or int(declared) > limit):
        raise too_large(limit)  # refused before a byte of the body is read
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise too_large(limit)
    try:
        pairs = parse_qsl(body.decode("ascii"), keep_blank_values=True, max_num_fields=MAX_FIELDS, errors="strict")
    except (UnicodeDecodeError, ValueError):
        raise FormRefused("The form could not be read.", 400) from None
    return FormData(pairs)
