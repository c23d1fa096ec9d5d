"""The review desk in a real browser (Debian's chromium, driven by Playwright): three raters log in and rate with
the keyboard, one tries to rate an item twice and one another rater's item, model text with <script> and
<img onerror> stays inert, Chinese is drawn with the desk's own font; then J, Table 2 and Table 3 are made from
those ratings. With $H2HTALK_DESK_SCREENSHOTS set to a folder, the desk's screenshots are saved there too (the
README's pictures in docs/ come from that)."""

from __future__ import annotations

import csv
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from h2htalk.review.store import ReviewStore
from h2htalk.review.tasks import GATED, SAFETY

from .desk_tree import MODEL, loaded_desk, start_desk, tables_from_ratings

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
