"""The results viewer in a real browser (Debian's chromium, driven by Playwright), opened from disk: it reaches
nothing but its own files, shows every item of the chosen model, variant and subtask with its prompt, answer,
reference, metric components, judge and flags, filters by flag and sorts by S and J; model text with <script>
and <img onerror> stays text; Chinese is drawn with the bundle's own font. With $H2HTALK_VIEWER_SCREENSHOTS set
to a folder, the screenshots are saved there too (the README's pictures in docs/ come from that)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from h2htalk.cli import main

from .desk_tree import INVISIBLE
from .export_tree import CUT_OFF, FAILED, HOSTILE, LEAK, LOCAL, NO_ANSWER, UNJUDGED, shared_tree
from .test_review_desk_browser import ARGS, CHROMIUM, LEFT_OF_LAST_TWO

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no {CHROMIUM} (CI installs Debian's chromium)"),
]
SHOWN = "() => document.body.dataset.ready === (location.hash || '#')"  # a function: the page's CSP forbids eval


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    _, config, results = shared_tree(tmp_path_factory)
    out = tmp_path_factory.mktemp("viewer") / "viewer"
    figures = ["--figures", str(out.parent)]
    assert main(["viewer", "--config", str(config), "--results", results.root.as_posix(), *figures]) == 0
    return out


@pytest.fixture
def chromium() -> Iterator[Browser]:
    with sync_playwright() as playwright:  # leaving it closes the browser
        yield playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)


def choose(page: Page, **choices: str) -> None:
    """Pick values as a user does, one control after another, waiting for each view."""
    for control, value in choices.items():
        page.select_option(f"#{control}", value)
        page.wait_for_function(SHOWN)


def screenshot(page: Page, folder: Path, name: str) -> None:
    page.screenshot(path=folder / f"viewer_{name}.png")
    wanted = os.environ.get("H2HTALK_VIEWER_SCREENSHOTS")
    if wanted:
        shutil.copy(folder / f"viewer_{name}.png", Path(wanted) / f"viewer_{name}.png")


def headline(page: Page, measure: str) -> list[float | None]:
    """The ``measure`` (S or J) of each item shown, in order; None where it has none."""
    texts = page.locator(".item .headline").all_inner_texts()
    values = [t.split(" ", 1)[1] for t in texts if t.startswith(f"{measure} ")]
    return [None if v == "–" else float(v) for v in values]


def test_the_viewer_shows_every_item_from_disk(bundle, chromium, tmp_path):
    page = chromium.new_context(viewport={"width": 1280, "height": 900}).new_page()
    requests, problems = [], []
    page.on("request", lambda request: requests.append(request.url))
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    page.goto((bundle / "index.html").as_uri())
    page.wait_for_function(SHOWN)
    fonts = page.evaluate(
        "async () => { await document.fonts.load('16px \"Viewer Noto Sans SC\"', '遥斗'); "
        "return [...document.fonts].filter(f => f.family.includes('Viewer Noto Sans SC')).map(f => f.status); }"
    )
    assert fonts == ["loaded"]  # the bundle's own Chinese font, whatever the system has

    # a judged subtask: every item with its judge; sorted by J, the item without a verdict comes last
    choose(page, model=LOCAL, variant="sap", subtask=UNJUDGED[0], sort="J-desc")
    items = page.locator("#items > li.item")
    assert items.count() == 3 and "J " in page.inner_text("#summary") and "n 2 of 3" in page.inner_text("#summary")
    ranked = headline(page, "J")
    assert ranked[-1] is None and ranked[:2] == sorted(ranked[:2], reverse=True)
    assert page.locator(".judge").count() == 3 and "Evidence: 日程安排合理" in page.inner_text("#items")
    assert page.locator("[data-flag=judge_missing]").count() == 1
    system = items.first.locator("details.system")
    assert system.get_attribute("open") is None and items.first.locator("details.user").get_attribute("open") == ""
    for part in ("Answer", "Reference", "BLEU-1", "ROUGE-L", "SS"):
        assert part in items.first.inner_text()
    screenshot(page, tmp_path, "judged")

    # model text is text: the hostile answer is shown as written, and nothing in it ran or became an element
    choose(page, subtask=CUT_OFF[0], sort="S-asc")
    assert headline(page, "S") == sorted(headline(page, "S"))
    answers = page.locator(".item .answer pre").all_inner_texts()
    assert any(text.startswith(HOSTILE) for text in answers)
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#items img, #items script").count() == 0

    # filter by flag: only the flagged items, each with its badge
    choose(page, flag="cut_off")
    assert page.locator("#items > li.item").count() == 1
    assert page.locator("#items > li.item").first.get_attribute("data-id").endswith(f"{CUT_OFF[1] + 1:02d}")
    assert "cut off at the token limit" in page.inner_text("#items")
    screenshot(page, tmp_path, "flags")
    choose(page, subtask=FAILED[0], flag="failed")
    assert "No answer: refused: content refused" in page.inner_text("#items")
    choose(page, subtask=LEAK[0], flag="leak")
    assert page.locator("#items > li.item").count() == 1 and page.locator(".badge.serious").count() == 1
    choose(page, model="gpt-4o", subtask=NO_ANSWER[0], flag="no_final_answer")
    assert page.locator("#items details.reasoning").count() == 1
    choose(page, flag="none")
    assert page.locator("#items .badge").count() == 0

    # the view is in the address: reopened from it, the page shows the same
    again = chromium.new_page()
    again.goto(page.url)
    again.wait_for_function(SHOWN)
    assert again.locator("#items > li.item").count() == page.locator("#items > li.item").count()
    assert all(url.startswith("file://") for url in requests), [u for u in requests if not u.startswith("file")]
    assert problems == []


def test_invisible_characters_in_an_answer_are_shown_as_tokens_never_applied(bundle, chromium, tmp_path):
    copy = tmp_path / "viewer"
    shutil.copytree(bundle, copy)
    data = copy / "data" / "answers" / LOCAL / "sap" / f"{CUT_OFF[0]}.js"
    key, payload = data.read_text(encoding="utf-8").removesuffix(");\n").removeprefix("H2H.data(").split(",", 1)
    answers = json.loads(payload)
    # every invisible character, then an override that would draw "AB" as "BA"
    answers["items"][0]["answer"] = "开头" + "".join(f"{ch}x" for ch in INVISIBLE) + "\u202eAB"
    data.write_text(f"H2H.data({key},{json.dumps(answers)});\n", encoding="utf-8")
    page = chromium.new_page()
    page.goto((copy / "index.html").as_uri())
    page.wait_for_function(SHOWN)
    choose(page, model=LOCAL, variant="sap", subtask=CUT_OFF[0])
    answer = page.locator(".item .answer pre").first
    text = answer.inner_text()
    assert not [ch for ch in INVISIBLE if ch in text]
    assert all(f"〚U+{ord(ch):04X}〛" in text for ch in INVISIBLE) and text.endswith("〚U+202E〛AB")
    a_left, b_left = answer.evaluate(LEFT_OF_LAST_TWO)
    assert a_left < b_left  # drawn left to right, as written
