"""The review desk as raters on a network meet it: a rating waiting on the login page is saved only for the rater
who typed it; who is logged in is checked before a form is read, bodies are refused past their limit as they
arrive, and a field over its limit is refused with the rater's text kept on the page."""

from __future__ import annotations

import html
import json
import re
import select
import socket

import pytest

from h2htalk.ratings import REVIEW_SCORES
from h2htalk.review.forms import ANONYMOUS_BYTES, FIELD_CHARS, FORM_BYTES
from h2htalk.review.store import ReviewStore, store_ratings
from h2htalk.review.tasks import GATED, INSTANCE

from .desk_tree import RATERS, loaded_desk, start_desk, stop_desk
from .test_review_desk import client, csrf_of, hidden_inputs, log_in


@pytest.fixture
def desk(tmp_path):
    """A small run's results tree, loaded into a desk store: (root, config file, store path)."""
    return tmp_path, loaded_desk(tmp_path), tmp_path / "desk" / "ratings.sqlite"


def test_a_rating_waiting_on_the_login_page_is_saved_only_for_the_rater_who_typed_it(desk):
    _, _, path = desk
    store = ReviewStore(path)
    both = [i for i, _ in store.queue("ana", GATED, 0) if store.is_assigned(i, "ben")]
    for item, sent_by_page in [(both[0], {"rater": "ana"}), (both[1], {})]:  # the page names ana, or nobody
        browser = client(path)
        log_in(browser, "ana")
        form = csrf_of(browser, item)
        assert hidden_inputs(browser.get(f"/item/{item}").text)["rater"] == "ana"  # the item's page names her
        browser.cookies.clear()  # ana's session ends on this browser (cookies cleared, or it ran out)
        kept = browser.post(f"/item/{item}", data={**form, **sent_by_page, "human_score": "4.5"})
        assert kept.status_code == 401 and "not saved yet" in kept.text
        carried = hidden_inputs(kept.text)
        assert carried["rating.rater"] == sent_by_page.get("rater", "")
        answer = browser.post("/login", data={**carried, "rater": "ben"}, follow_redirects=False)  # ben logs in here
        assert answer.status_code == 409 and "discarded, not saved" in answer.text and "logged in as ben" in answer.text
        assert browser.get("/").status_code == 200  # ben is logged in, and nothing was stored as his
        assert store.rating(item, "ben") is None and store.rating(item, "ana") is None
    assert store_ratings(path, REVIEW_SCORES) == []


def test_forms_are_read_within_limits_that_depend_on_who_sends_them(desk):
    _, _, path = desk
    store = ReviewStore(path)
    item = store.queue("ana", GATED, 0)[0][0]
    browser = client(path)
    browser.get("/login")
    login = {"csrf": browser.cookies["desk_login"], "rater": "ana"}
    big = "x" * (ANONYMOUS_BYTES + 1)
    assert browser.post("/login", data={**login, "token": big}).status_code == 413
    assert browser.post("/logout", data={"csrf": big}).status_code == 401  # not logged in: the form is not read
    kept = browser.post(f"/item/{item}", data={"human_score": "3", "rater": "ana", "pad": big})
    assert kept.status_code == 401 and "too long to keep here" in kept.text and 'name="rating.' not in kept.text
    assert browser.post("/login", data=login, files={"x": b"1"}).status_code == 415  # only the desk's own forms
    log_in(browser, "ana")
    form = csrf_of(browser, item)
    padded = {**form, "human_score": "3", "pad": big}  # over the anonymous limit, within a session's
    assert browser.post(f"/item/{item}", data=padded, follow_redirects=False).status_code == 303
    too_big = browser.post(f"/item/{item}", data={**form, "pad": "x" * FORM_BYTES})
    assert too_big.status_code == 413 and "larger than the desk takes" in too_big.text
    assert [r.values for r in store_ratings(path, REVIEW_SCORES)] == [{"human_score": 3.0}]


def test_an_edit_over_the_fields_limit_is_refused_and_kept_on_the_page(desk):
    _, _, path = desk
    store = ReviewStore(path)
    rater, item = next(
        (r, i) for r in RATERS for i, _ in store.queue(r, INSTANCE, 0) if store.item(i).shown["fields"] is not None
    )
    fields = store.item(item).shown["fields"]
    edit = json.dumps({**fields, "history_memory": "遥斗和用户\u202e" * (FIELD_CHARS // 6)}, ensure_ascii=False)
    browser = client(path)
    log_in(browser, rater)
    form = csrf_of(browser, item)
    page = browser.get(f"/item/{item}").text
    assert f'data-max-chars="{FIELD_CHARS}"' in page  # the browser holds it back before sending it
    refused = browser.post(f"/item/{item}", data={**form, "decision": "keep", "fields": edit})
    assert refused.status_code == 413 and f"more than the desk takes ({FIELD_CHARS:,})" in refused.text
    box = re.search(r'<textarea name="fields"[^>]*>(.*?)</textarea>', refused.text, re.S)[1]
    assert html.unescape(box) == edit  # the rater's text, exactly, invisible characters too
    assert store.rating(item, rater) is None
    shorter = json.dumps({**fields, "history_memory": "遥斗和用户"}, ensure_ascii=False)
    saved = browser.post(f"/item/{item}", data={**form, "decision": "keep", "fields": shorter}, follow_redirects=False)
    assert saved.status_code == 303 and store.rating(item, rater)["fields"]["history_memory"] == "遥斗和用户"


def answer_to(base: str, request: bytes, body_chunks: int, chunk: bytes) -> tuple[str, int]:
    """Send ``request``'s head, then up to ``body_chunks`` chunks of its body (chunked), one at a time, each once
    the desk has had a moment to answer: (the desk's status line, the body bytes sent before it answered)."""
    host, port = base.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request)
        sent = 0
        for _ in range(body_chunks + 1):
            if select.select([sock], [], [], 0.05)[0]:
                return sock.recv(4096).split(b"\r\n")[0].decode(), sent
            if sent < body_chunks * len(chunk):
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                sent += len(chunk)
        if select.select([sock], [], [], 10)[0]:
            return sock.recv(4096).split(b"\r\n")[0].decode(), sent
        raise AssertionError("the desk did not answer")


@pytest.mark.slow
def test_an_unknown_senders_body_is_refused_before_it_is_read(desk):
    root, config, _ = desk
    server, base = start_desk(root, config)
    host = base.removeprefix("http://")
    head = f"POST /item/1 HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/x-www-form-urlencoded\r\n"
    try:
        # a megabyte announced, none of it sent: the desk answers at once, from the headers
        status, sent = answer_to(base, f"{head}Content-Length: 1048576\r\n\r\n".encode(), 0, b"")
        assert status == "HTTP/1.1 401 Unauthorized" and sent == 0
        # a body of no announced length: counted as it arrives, refused just past the limit
        chunked = f"{head}Transfer-Encoding: chunked\r\n\r\n".encode()
        status, sent = answer_to(base, chunked, 1024, b"a=" + b"x" * 1022)
        assert status == "HTTP/1.1 401 Unauthorized" and ANONYMOUS_BYTES < sent < 4 * ANONYMOUS_BYTES
    finally:
        stop_desk(server)
