"""The review desk as raters on a network meet it: a rating waiting on the login page is saved only for the rater
who typed it; who is logged in is checked before a form is read, bodies are refused past their limit as they
arrive, and a field over its limit is refused with the rater's text kept on the page."""

from __future__ import annotations

import base64
import datetime
import gc
import hashlib
import html
import ipaddress
import json
import re
import select
import socket
import ssl
import weakref
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from starlette.requests import Request
from starlette.testclient import TestClient

from h2htalk.cli import main
from h2htalk.desk_store.store import ReviewStore, store_ratings
from h2htalk.desk_store.tasks import GATED, INSTANCE
from h2htalk.ratings import REVIEW_SCORES
from h2htalk.review.app import desk_app
from h2htalk.review.forms import ANONYMOUS_BYTES, FIELD_CHARS, FORM_BYTES, FormRefused, read_form
from h2htalk.review.serving import INSECURE_WARNING, check_serving

from .desk_tree import RATERS, loaded_desk, start_desk, stop_desk
from .test_review_desk import client, csrf_of, hidden_inputs, log_in, login_answer


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
        said = "ana's rating of item" if sent_by_page else "the page did not say whose it is"
        assert said in " ".join(kept.text.split())
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


def refused_form(headers: list[tuple[bytes, bytes]], body: bytes) -> FormRefused:
    """What read_form raises for a request of ``headers`` whose ``body`` is sent in 1 KB chunks, run to its end
    without an event loop (whose own bookkeeping would hold the exception)."""
    chunks = [body[i : i + 1024] for i in range(0, len(body), 1024)]

    async def receive() -> dict:
        return {"type": "http.request", "body": chunks.pop(0) if chunks else b"", "more_body": bool(chunks)}

    request = Request({"type": "http", "method": "POST", "headers": headers}, receive)
    try:
        read_form(request, ANONYMOUS_BYTES).send(None)
    except FormRefused as refused:
        return refused
    raise AssertionError("the form was read")


@pytest.mark.parametrize("announced", [True, False], ids=["content-length", "streamed"])
def test_a_refused_form_is_freed_as_soon_as_it_is_answered(announced):
    # a refusal that stays in a reference cycle holds its connection (TLS buffers, the body read so far) until the
    # cyclic collector runs: a flood of refused posts then keeps all of theirs at once
    body = b"a=" + b"x" * (4 * ANONYMOUS_BYTES)
    headers = [(b"content-type", b"application/x-www-form-urlencoded")]
    if announced:
        headers.append((b"content-length", str(len(body)).encode()))
    gc.disable()
    try:
        refused = refused_form(headers, body)
        assert refused.status == 413
        gone = weakref.ref(refused)
        del refused
        assert gone() is None  # freed by its reference count alone
    finally:
        gc.enable()


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


# --- TLS on a network ---------------------------------------------------------------------------------------------


def self_signed(folder: Path, host: str) -> tuple[Path, Path, str]:
    """A certificate for ``host`` (an IP address), signed by its own key, made here: (certificate, key, its public
    key's SHA-256 in base64, as chromium's --ignore-certificate-errors-spki-list takes it)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "h2htalk review desk (test)")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(host))]), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "desk.crt", folder / "desk.key"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    spki = key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return cert_path, key_path, base64.b64encode(hashlib.sha256(spki).digest()).decode()


@pytest.mark.slow
def test_a_form_near_its_limit_arrives_whole_over_tls(desk):
    # desk-serve reads TLS a record at a time (TLS_READ_BYTES), not asyncio's 256 KB: a form of nearly FORM_BYTES
    # still arrives whole, and is stored
    root, config, path = desk
    (root / "tls").mkdir()
    certificate, key, _ = self_signed(root / "tls", "127.0.0.2")
    store = ReviewStore(path)
    token, item = store.new_token("ana"), store.queue("ana", GATED, 0)[0][0]
    trusted = ssl.create_default_context(cafile=str(certificate))
    options = ("--certfile", str(certificate), "--keyfile", str(key))
    server, base = start_desk(root, config, "127.0.0.2", tls=trusted, options=options)
    try:
        with httpx.Client(base_url=base, verify=trusted, timeout=60) as browser:
            log_in(browser, "ana", token)
            sent = {**csrf_of(browser, item), "human_score": "3.5", "pad": "x" * (FORM_BYTES - 4096)}
            assert browser.post(f"/item/{item}", data=sent).status_code == 303
    finally:
        stop_desk(server)
    assert [r.values for r in store_ratings(path, REVIEW_SCORES)] == [{"human_score": 3.5}]


def cookie_flags(answer: httpx.Response, name: str) -> set[str]:
    [header] = [h for h in answer.headers.get_list("set-cookie") if h.startswith(f"{name}=")]
    return {part.strip().lower() for part in header.split(";")[1:]}


@pytest.mark.parametrize(
    ("options", "refused"),
    [
        (["--host", "192.0.2.1"], "is not a loopback address"),
        (["--host", "0.0.0.0"], "is not a loopback address"),
        (["--host", "::"], "is not a loopback address"),
        (["--host", "192.0.2.1", "--certfile", "desk.crt"], "go together"),
        (["--host", "192.0.2.1", "--certfile", "none.crt", "--keyfile", "desk.key"], "none.crt: no such file"),
        (["--host", "192.0.2.1", "--public-url", "https://desk.example.org"], "give --host a loopback address"),
        (["--host", "127.0.0.2", "--public-url", "http://desk.example.org"], "over plain HTTP on a network"),
        (["--host", "127.0.0.2", "--public-url", "desk.example.org"], "give the scheme and host"),
    ],
)  # fmt: skip
def test_the_desk_does_not_serve_a_network_in_clear(desk, options, refused, capsys, monkeypatch):
    root, config, _ = desk
    (root / "desk.crt").write_text("x")
    (root / "desk.key").write_text("x")
    monkeypatch.chdir(root)
    assert main(["desk-serve", "--config", str(config), *options]) == 2  # before anything listens
    said = capsys.readouterr().err
    assert refused in said
    if "loopback address:" in said:  # each way to serve it there, with its command
        assert "--certfile desk.crt --keyfile desk.key" in said and "--public-url https://" in said
        assert "ssh -N -L 8765:127.0.0.2:8765" in said and "--insecure-http" in said


def test_cookies_need_tls_whenever_raters_reach_the_desk_over_it(desk):
    _, _, path = desk
    token = ReviewStore(path).new_token("ana")
    served = {
        "plain": (TestClient(desk_app(str(path), 0, host="127.0.0.2"), base_url="http://127.0.0.2"), False),
        "tls": (TestClient(desk_app(str(path), 0, host="192.0.2.1", tls=True), base_url="https://192.0.2.1"), True),
        "proxy": (
            TestClient(
                desk_app(str(path), 0, host="127.0.0.1", public_url="https://desk.example.org"),
                base_url="https://desk.example.org",
            ),
            True,
        ),
    }
    for name, (browser, secure) in served.items():
        form = browser.get("/login")
        assert ("secure" in cookie_flags(form, "desk_login")) == secure, name
        data = {"csrf": browser.cookies["desk_login"], "rater": "ana", "token": token}
        answer = browser.post("/login", data=data, follow_redirects=False)
        assert answer.status_code == 303, name
        assert ("secure" in cookie_flags(answer, "desk_session")) == secure, name
        assert {"httponly", "samesite=strict"} <= cookie_flags(answer, "desk_session"), name
    proxied, _ = served["proxy"]
    assert proxied.get("/", headers={"Host": "127.0.0.1:8765"}).status_code == 400  # only the public name
    item = ReviewStore(path).queue("ana", GATED, 0)[0][0]
    form = csrf_of(proxied, item)
    for origin, status in (("http://127.0.0.1:8765", 403), ("https://desk.example.org", 303)):
        sent = proxied.post(
            f"/item/{item}", data={**form, "human_score": "2"}, headers={"Origin": origin}, follow_redirects=False
        )
        assert sent.status_code == status, origin
    behind = TestClient(
        desk_app(str(path), 0, host="127.0.0.1", public_url="https://desk.example.org"),
        base_url="https://desk.example.org",
    )
    assert login_answer(behind, "ana", "") == 401  # through a proxy, even on 127.0.0.1 a name alone is not enough


def test_a_desk_served_in_clear_on_purpose_says_so_on_every_page(desk):
    _, _, path = desk
    store = ReviewStore(path)
    token = store.new_token("ana")
    warned = TestClient(desk_app(str(path), 0, host="192.0.2.1", warning=INSECURE_WARNING), base_url="http://192.0.2.1")
    log_in(warned, "ana", token)
    item = store.queue("ana", GATED, 0)[0][0]
    pages = [warned.get(url) for url in ("/", f"/item/{item}", "/item/99999", "/next/nothing")]
    pages.append(warned.post(f"/item/{item}", data={"csrf": "forged", "human_score": "2"}))
    pages.append(client(path, "192.0.2.1").get("/login"))  # the page of the same store served safely
    assert [INSECURE_WARNING in html.unescape(p.text) for p in pages] == [True] * 5 + [False]
    check_serving("192.0.2.1", 8765, None, None, None, insecure=True)  # what the command lets through
