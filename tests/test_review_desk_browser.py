"""The review desk in a real browser (Debian's chromium, driven by Playwright): three raters log in and rate with
the keyboard, one tries to rate an item twice and one another rater's item, model text with <script> and
<img onerror> stays inert, Chinese is drawn with the desk's own font; then J, Table 2 and Table 3 are made from
those ratings. With $H2HTALK_DESK_SCREENSHOTS set to a folder, the desk's screenshots are saved there too (the
README's pictures in docs/ come from that)."""

from __future__ import annotations

import csv
import os
import shutil
import ssl
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page, sync_playwright
from playwright.sync_api import Error as PlaywrightError

from h2htalk.desk_store.store import DeskItem, ReviewStore, store_ratings
from h2htalk.desk_store.tasks import GATED, INSTANCE, SAFETY
from h2htalk.ratings import REVIEW_SCORES
from h2htalk.review.forms import FIELD_CHARS

from .desk_tree import (
    INVISIBLE,
    MODEL,
    RATERS,
    free_port,
    loaded_desk,
    run,
    start_desk,
    stop_desk,
    tables_from_ratings,
)  # fmt: skip
from .test_review_desk_network import self_signed

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--no-first-run",
]  # fmt: skip

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no {CHROMIUM} (CI installs Debian's chromium)"),
]


@pytest.fixture
def desk(tmp_path) -> Iterator[tuple[Path, Path, str]]:
    """A small run loaded into the desk, and the desk serving it: (root, config, base URL)."""
    config = loaded_desk(tmp_path)
    server, base = start_desk(tmp_path, config)
    try:
        yield tmp_path, config, base
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.fixture
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield chromium
        chromium.close()


def screenshot(page: Page, folder: Path, name: str) -> None:
    page.screenshot(path=folder / f"review_desk_{name}.png", full_page=True)
    wanted = os.environ.get("H2HTALK_DESK_SCREENSHOTS")
    if wanted:
        shutil.copy(folder / f"review_desk_{name}.png", Path(wanted) / f"review_desk_{name}.png")


def log_in(browser: Browser, base: str, rater: str) -> Page:
    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()  # a rater's own cookies
    page.goto(base + "/login")
    page.fill("input[name=rater]", rater)
    page.keyboard.press("Enter")
    page.wait_for_selector("text=Your tasks")
    return page


def inert(page: Page) -> None:
    """Nothing a model wrote ran or became an element: its text is there, as text."""
    assert page.evaluate("window.__pwned") is None
    assert page.locator("main img").count() == 0 and page.locator("main script").count() == 0


def rate_all(page: Page, base: str, task: str, keys: list[str], shots: Path | None = None) -> int:
    """Rate every open item of ``task`` with the keyboard: the judge's verdict appears only once it is saved."""
    rated = 0
    while True:
        page.goto(f"{base}/next/{task}")
        if "/?done=" in page.url:
            return rated
        assert "The judge" not in page.inner_text("main")
        inert(page)
        if shots and rated == 0:
            screenshot(page, shots, task)
        for key in keys:
            page.keyboard.press(key)
        page.keyboard.press("Enter")
        page.wait_for_selector(".saved")
        assert "The judge" in page.inner_text(".saved")
        if shots and rated == 0:
            screenshot(page, shots, f"{task}_saved")
        inert(page)
        rated += 1


def test_three_raters_rate_in_the_browser_and_the_tables_follow(desk, browser, tmp_path):
    root, config, base = desk
    store_path = root / "desk" / "ratings.sqlite"
    shots = tmp_path / "shots"
    shots.mkdir()

    ana = log_in(browser, base, "ana")
    screenshot(ana, shots, "home")
    fonts = ana.evaluate(
        "async () => { await document.fonts.load('16px \"Desk Noto Sans SC\"', '遥斗'); "
        "return [...document.fonts].filter(f => f.family.includes('Desk Noto Sans SC')).map(f => f.status); }"
    )
    assert fonts == ["loaded"]  # the desk's own Chinese font, whatever the system has
    ana.goto(f"{base}/next/{GATED}")
    system = ana.locator("details", has_text="System prompt")
    assert system.get_attribute("open") is None  # long inputs are folded until asked for
    system.locator("summary").click()
    assert system.get_attribute("open") is not None

    # ben opens his first gated plan in two tabs, rates it in one, then tries again from the other
    ben = log_in(browser, base, "ben")
    ben.goto(f"{base}/next/{GATED}")
    twice = ben.context.new_page()
    twice.goto(ben.url)
    ben.keyboard.press("4")
    ben.keyboard.press("Enter")
    ben.wait_for_selector(".saved")
    twice.keyboard.press("1")
    twice.keyboard.press("Enter")
    twice.wait_for_selector(".problem")
    assert "already rated" in twice.inner_text(".problem")
    twice.close()

    rated = {
        "ana": rate_all(ana, base, GATED, ["2"], shots) + rate_all(ana, base, SAFETY, ["2", "y", "a"], shots),
        "ben": 1 + rate_all(ben, base, GATED, ["4"]) + rate_all(ben, base, SAFETY, ["4", "n"]),
    }
    cai = log_in(browser, base, "cai")
    rated["cai"] = rate_all(cai, base, GATED, ["3"]) + rate_all(cai, base, SAFETY, ["1", "y", "c"])
    ana.goto(base + "/")
    screenshot(ana, shots, "progress")

    # cai tries an item that is not hers: the page refuses to show it and to store a rating of it
    store = ReviewStore(store_path)
    hers = {i for task in (GATED, SAFETY) for i, _ in store.queue("cai", task, 0)}
    other = min({i for task in (GATED, SAFETY) for i, _ in store.queue("dee", task, 0)} - hers)
    refused = cai.goto(f"{base}/item/{other}")
    assert refused.status == 403 and "not assigned to you" in cai.inner_text(".problem")
    mine = cai.goto(f"{base}/item/{min(hers)}")
    csrf = cai.locator("input[name=csrf]").first.get_attribute("value")
    posted = cai.request.post(
        f"{base}/item/{other}", form={"csrf": csrf, "item_hash": store.item(other).hash, "human_score": "5"}
    )
    assert mine.status == 200 and posted.status == 403

    logged = dict(store.db.execute("SELECT rater, COUNT(*) FROM log GROUP BY rater").fetchall())
    assert logged == rated and all(count > 0 for count in rated.values())

    made = tables_from_ratings(root, config)
    scored = [item for item in made["j_items"] if item["human"]]
    assert scored and all(len(item["human"]["ratings"]) >= 2 for item in scored)
    assert all(not item["review"] for item in scored)
    table3 = list(csv.DictReader(made["table3"].splitlines()))
    assert all(int(row["human_ratings"]) >= int(row["human_rated"]) > 0 for row in table3[:2])  # both variants
    [judge_vs_people] = [
        r for r in made["agreement"] if r["field"] == "human_score" and r["comparison"] != "between raters"
    ]
    assert int(judge_vs_people["items"]) == len(scored)  # the report reads the ratings the page stored
    assert MODEL in made["table2"]


# --- one desk per test, started and restarted by the test ------------------------------------------------------


@pytest.fixture
def tree(tmp_path) -> tuple[Path, Path, Path]:
    """A small run loaded into the desk, not served yet: (root, config, store)."""
    return tmp_path, loaded_desk(tmp_path), tmp_path / "desk" / "ratings.sqlite"


@contextmanager
def serving(
    root: Path, config: Path, host: str = "127.0.0.1", port: int | None = None, options: tuple[str, ...] = ()
) -> Iterator[str]:
    server, base = start_desk(root, config, host, port, options=options)
    try:
        yield base
    finally:
        stop_desk(server)


def log_in_with(browser: Browser, base: str, rater: str, token: str = "") -> Page:
    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    page.goto(base + "/login")
    page.fill("input[name=rater]", rater)
    page.fill("input[name=token]", token)
    with page.expect_navigation():
        page.keyboard.press("Enter")
    return page


def test_a_desk_on_127_0_0_2_asks_for_tokens_and_a_new_token_logs_the_rater_out(tree, browser):
    root, config, path = tree
    token = ReviewStore(path).new_token("ana")
    with serving(root, config, "127.0.0.2") as base:
        wrong = log_in_with(browser, base, "ana", "not-her-token")
        assert "Unknown rater, or a wrong token" in wrong.inner_text(".problem")
        assert wrong.locator("input[name=token]").get_attribute("required") is not None  # a name alone is not sent
        ana = log_in_with(browser, base, "ana", token)
        assert "Your tasks" in ana.inner_text("main")
        ana.goto(f"{base}/next/{GATED}")
        ana.keyboard.type("3")
        ana.keyboard.press("Enter")
        ana.wait_for_selector(".saved")
        assert "Your score: 3.0" in ana.inner_text(".saved")
        ana.goto(f"{base}/next/{GATED}")
        run("desk-token", "--config", str(config), "ana")  # ana's token is reissued while her item is open
        ana.keyboard.type("4")
        ana.keyboard.press("Enter")
        ana.wait_for_selector("text=not saved yet")  # logged out; the choice waits on the login page
        assert "human_score: 4" in ana.inner_text(".pending")
        ana.goto(f"{base}/")
        assert ana.locator("input[name=rater]").count() == 1  # logged out: the login form
        again = log_in_with(browser, base, "ana", token)  # the old token no longer works
        assert "Unknown rater, or a wrong token" in again.inner_text(".problem")
    assert [r.values for r in store_ratings(path, REVIEW_SCORES)] == [{"human_score": 3.0}]


def test_the_gated_form_takes_a_score_in_the_rubrics_tenths_and_nothing_finer(tree, browser):
    root, config, path = tree
    with serving(root, config) as base:
        ana = log_in(browser, base, "ana")
        ana.goto(f"{base}/next/{GATED}")
        item = ana.url
        box = ana.locator("input[name=human_score]")
        assert "一位小数" in ana.inner_text("main") and box.is_visible()
        for text in ("3.75", "٤", "５", "5.5", "-1", "3."):
            box.fill(text)
            ana.keyboard.press("Enter")
            assert box.evaluate("box => box.validity.patternMismatch"), text
            assert ana.url == item and ana.locator(".saved").count() == 0, text  # the browser does not send it
        box.fill("")
        ana.locator("main").click(position={"x": 5, "y": 5})  # away from the box: a score typed still goes there
        ana.keyboard.type("3.7")
        ana.keyboard.press("Enter")
        ana.wait_for_selector(".saved")
        assert "Your score: 3.7" in ana.inner_text(".saved")
    assert [r.values for r in store_ratings(path, REVIEW_SCORES)] == [{"human_score": 3.7}]


def test_invisible_characters_in_an_answer_are_shown_as_tokens_never_applied(tree, browser):
    root, config, path = tree
    store = ReviewStore(path)
    shown = store.item(store.queue("ana", SAFETY, 0)[0][0]).shown
    answer = "开头" + "".join(f"{ch}x" for ch in INVISIBLE) + "\u202eAB"  # the last override would reverse "AB"
    store.load([DeskItem(SAFETY, (MODEL, "sap", "invisible"), {**shown, "answer": answer})], RATERS, len(RATERS), 0)
    item = max(i for i, _ in store.queue("ana", SAFETY, 0))
    with serving(root, config) as base:
        ana = log_in(browser, base, "ana")
        ana.goto(f"{base}/item/{item}")
        text = ana.locator(".block.answer .text").inner_text()
        assert not [ch for ch in INVISIBLE if ch in text]
        assert all(f"〚U+{ord(ch):04X}〛" in text for ch in INVISIBLE) and text.endswith("〚U+202E〛AB")
        a_left, b_left = ana.locator(".block.answer .text").evaluate(LEFT_OF_LAST_TWO)
        assert a_left < b_left  # drawn left to right, as written
        inert(ana)


# the left edges of the last two characters of an element's text, as drawn
LEFT_OF_LAST_TWO = """element => {
  const node = element.lastChild;
  const left = (at) => { const r = document.createRange(); r.setStart(node, at); r.setEnd(node, at + 1);
                         return r.getBoundingClientRect().left; };
  return [left(node.length - 2), left(node.length - 1)];
}"""


def test_a_restart_keeps_the_session_and_a_choice_made_before_it(tree, browser):
    root, config, path = tree
    port = free_port()
    with serving(root, config, port=port) as base:
        ana = log_in(browser, base, "ana")
        ana.goto(f"{base}/next/{GATED}")
        ana.keyboard.type("2.5")  # chosen, not sent yet
    with serving(root, config, port=port):
        ana.keyboard.press("Enter")  # sent to the restarted desk
        ana.wait_for_selector(".saved")
        assert "Your score: 2.5" in ana.inner_text(".saved")
        # logged out meanwhile (in another tab): the choice waits on the login page and is saved after it
        ana.goto(f"{base}/next/{GATED}")
        ana.keyboard.type("1.5")
        other = ana.context.new_page()
        other.goto(base + "/")
        other.click("text=Log out")
        other.wait_for_selector("input[name=rater]")
        ana.keyboard.press("Enter")
        ana.wait_for_selector("text=not saved yet")
        assert "human_score: 1.5" in ana.inner_text(".pending")
        ana.fill("input[name=rater]", "ana")
        ana.keyboard.press("Enter")
        ana.wait_for_selector(".saved")
        assert "Your score: 1.5" in ana.inner_text(".saved")
    assert sorted(r.values["human_score"] for r in store_ratings(path, REVIEW_SCORES)) == [1.5, 2.5]


# --- on a network: TLS, or a refusal -----------------------------------------------------------------------------


def address_bar(page: Page, text: str) -> None:
    """A line at the top of the page saying where it was loaded from (headless chromium draws no address bar),
    for the screenshots."""
    page.evaluate(
        """text => { const bar = document.createElement("div"); bar.textContent = text;
        Object.assign(bar.style, {font: "14px monospace", background: "#e8f0e8", padding: "6px 12px",
                                  borderBottom: "1px solid #9a9"});
        document.body.prepend(bar); }""",
        text,
    )


def test_a_rater_rates_over_tls_in_chromium_which_checks_the_certificate(tree, tmp_path):
    root, config, path = tree
    certificate, key, spki = self_signed(tmp_path, "127.0.0.2")
    token = ReviewStore(path).new_token("ana")
    trusted = ssl.create_default_context(cafile=str(certificate))
    options = ("--certfile", str(certificate), "--keyfile", str(key))
    server, base = start_desk(root, config, "127.0.0.2", tls=trusted, options=options)
    try:
        assert base.startswith("https://")
        with pytest.raises(httpx.TransportError):
            httpx.get(base.replace("https://", "http://") + "/login", timeout=5)  # no plain HTTP beside it
        with sync_playwright() as playwright:
            strict = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            with pytest.raises(PlaywrightError, match="ERR_CERT_AUTHORITY_INVALID"):
                strict.new_page().goto(base + "/login")  # a certificate nobody vouches for is refused
            strict.close()
            # the browser accepts this certificate's key, and no other
            chromium = playwright.chromium.launch(
                executable_path=CHROMIUM, args=[*ARGS, f"--ignore-certificate-errors-spki-list={spki}"]
            )
            ana = log_in_with(chromium, base, "ana", token)
            assert "Your tasks" in ana.inner_text("main")
            ana.goto(f"{base}/next/{GATED}")
            assert ana.evaluate("window.isSecureContext && location.protocol") == "https:"
            cookies = ana.context.cookies()
            assert {c["name"] for c in cookies} == {"desk_session"} and all(c["secure"] for c in cookies)
            address_bar(ana, f"{ana.url}   (TLS; the certificate is self-signed, made by the test)")
            screenshot(ana, tmp_path, "tls")
            ana.keyboard.type("3.5")
            ana.keyboard.press("Enter")
            ana.wait_for_selector(".saved")
            assert "Your score: 3.5" in ana.inner_text(".saved")
            chromium.close()
    finally:
        stop_desk(server)
    assert [r.values for r in store_ratings(path, REVIEW_SCORES)] == [{"human_score": 3.5}]


def test_on_a_network_address_without_tls_the_desk_refuses_or_warns_on_every_page(tree, browser, tmp_path):
    root, config, path = tree
    command = ["h2htalk", "desk-serve", "--config", "config.yaml", "--host", "0.0.0.0"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")}
    refused = subprocess.run(
        [sys.executable, "-m", *command], cwd=root, env=env, capture_output=True, text=True, timeout=120
    )
    assert refused.returncode == 2 and "is not a loopback address" in refused.stderr
    terminal = browser.new_page(viewport={"width": 1180, "height": 230})
    terminal.set_content("<pre></pre>")
    terminal.locator("pre").evaluate(
        """(pre, text) => { pre.textContent = text;
        Object.assign(pre.style, {background: "#1e1e1e", color: "#ddd", padding: "16px", margin: "0",
                                  font: "13px/1.45 monospace", whiteSpace: "pre-wrap"}); }""",
        f"$ {' '.join(command)}\n{refused.stderr}",
    )
    screenshot(terminal, tmp_path, "refused")
    token = ReviewStore(path).new_token("ana")
    with serving(root, config, "127.0.0.2", options=("--insecure-http",)) as base:
        ana = log_in_with(browser, base, "ana", token)
        for url in (f"{base}/", f"{base}/next/{GATED}", f"{base}/item/99999"):
            ana.goto(url)
            assert "served without encryption" in ana.inner_text(".insecure"), url
        ana.goto(f"{base}/next/{GATED}")
        screenshot(ana, tmp_path, "insecure")


def test_an_edit_over_the_fields_limit_is_held_back_by_the_browser_with_the_text_kept(tree, browser):
    root, config, path = tree
    store = ReviewStore(path)
    rater, item = next(
        (r, i) for r in RATERS for i, _ in store.queue(r, INSTANCE, 0) if store.item(i).shown["fields"] is not None
    )
    edit = "遥斗" * 175_000  # a megabyte (UTF-8) pasted into the box
    with serving(root, config) as base:
        page = log_in(browser, base, rater)
        page.goto(f"{base}/item/{item}")
        box = page.locator("textarea[name=fields]")
        box.fill(edit)
        page.check("input[name=decision][value=keep]")
        page.locator("#rating button[type=submit]").click()
        assert "the desk takes at most 20000" in box.evaluate("box => box.validationMessage")
        assert page.url == f"{base}/item/{item}" and page.locator(".saved").count() == 0  # not sent
        assert box.input_value() == edit  # the rater's text, all of it, still in the box
        box.fill(edit[:FIELD_CHARS])  # cut to the limit: it may be sent
        assert box.evaluate("box => box.validationMessage") == ""
    assert store.rating(item, rater) is None
