"""The review desk without a browser: its items, assignment, store, page (over HTTP), offline files, and the
consumers that read its ratings."""

from __future__ import annotations

import contextlib
import csv
import html
import itertools
import json
import re
import signal
import sqlite3
import stat
import sys
import threading
import time
import unicodedata
from collections import Counter
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

from h2htalk.cli import main
from h2htalk.config import merge_layers, validate_config
from h2htalk.desk_store.assign import assign
from h2htalk.desk_store.store import DeskItem, ReviewStore, StoredItem, canonical, ratings_digest, store_ratings
from h2htalk.desk_store.tasks import GATED, INSTANCE, NEED, SAFETY, TASKS, Refused, form_values
from h2htalk.errors import DataError, H2HTalkError
from h2htalk.io import sha256_file
from h2htalk.prompts.render import sap_text
from h2htalk.ratings import INSTANCE_DECISIONS, REVIEW_SCORES, SAFETY_RATINGS
from h2htalk.review.app import desk_app
from h2htalk.review.collect import desk_items
from h2htalk.review.hosts import host_of
from h2htalk.review.offline import export_open_items, import_ratings
from h2htalk.review.sessions import sessions_path

from .desk_tree import (
    HOSTILE,
    INVISIBLE,
    MODEL,
    RATERS,
    SUBTASK,
    loaded_desk,
    run,
    start_desk,
    stop_desk,
    tables_from_ratings,
)


@pytest.fixture
def desk(tmp_path):
    """A small run's results tree, loaded into a desk store: (root, config file, store path)."""
    return tmp_path, loaded_desk(tmp_path), tmp_path / "desk" / "ratings.sqlite"


def settings(config: Path) -> dict:
    return validate_config(merge_layers([config]))


def first_assigned(store: ReviewStore, rater: str, task: str) -> int:
    return store.queue(rater, task, 0)[0][0]


def unassigned(store: ReviewStore, rater: str, task: str) -> int:
    mine = {item for item, _ in store.queue(rater, task, 0)}
    others = {item for other in RATERS for item, _ in store.queue(other, task, 0)}
    return min(others - mine)


# --- items, assignment, store ---------------------------------------------------------------------------------


def test_every_task_is_read_from_the_results_tree_blind_to_model_and_variant(desk):
    root, config, _ = desk
    from h2htalk.layout import Layout

    found = desk_items(settings(config), Layout(str(root / "results")), list(TASKS))
    # two of three plans per variant are gated; one safety scenario of three turns and two need items a variant
    assert {task: len(items) for task, items in found.items()} == {GATED: 4, SAFETY: 6, NEED: 4, INSTANCE: 2}
    for items in found.values():
        for item in items:
            shown = canonical(item.shown)
            assert MODEL not in shown and sap_text() not in shown and "sap" not in shown.lower()
            assert "judge" not in shown and "scores" not in shown  # the verdicts wait in ``after``
    gated = found[GATED][0]
    assert gated.shown["rubric"].startswith("【评分细则】") and gated.shown["level"]["level_name"].startswith("Level I")
    assert gated.after["judge_scores"] == [2, 2, 3]
    safety = found[SAFETY][-1]
    assert [t["role"] for t in safety.shown["conversation"]] == ["user", "assistant", "user", "assistant", "user"]
    assert "reference" not in safety.shown  # the paper's safety scores are the users' perception
    assert found[NEED][0].shown["need"]
    failed = next(i for i in found[INSTANCE] if i.shown["fields"] is None)
    assert failed.shown["task"] is None and set(failed.shown["field_help"]) == {"hobbies", "history_memory"}


def test_assignment_is_balanced_seeded_and_never_twice_to_one_rater():
    raters = ["a", "b", "c", "d", "e"]
    items = [(i, "gated" if i < 7 else "safety") for i in range(20)]
    pairs = assign(items, raters, 3, seed=1)
    assert pairs == assign(items, raters, 3, seed=1) and pairs != assign(items, raters, 3, seed=2)
    by_item = Counter(item for item, _ in pairs)
    assert set(by_item.values()) == {3} and len(set(pairs)) == len(pairs)  # three raters, each once
    for task in ("gated", "safety"):
        loads = Counter(r for i, r in pairs if dict(items)[i] == task)
        assert max(loads.values()) - min(loads.values()) <= 1, task
    later = assign([(20, "gated"), (21, "gated")], raters, 3, 1, [(r, dict(items)[i]) for i, r in pairs])
    loads = Counter(r for i, r in pairs + later if i < 7 or i >= 20)
    assert max(loads.values()) - min(loads.values()) <= 1  # items loaded later go to the least loaded
    with pytest.raises(H2HTalkError, match=r"each item goes to 3 raters .* but 2 are listed"):
        assign(items, ["a", "b"], 3, 0)


def test_each_rater_has_their_own_order_and_items_are_numbered_blind(tmp_path):
    store = ReviewStore(tmp_path / "s.sqlite", create=True)
    items = [DeskItem(SAFETY, ("m", v, f"s{n}-t1"), {"answer": f"{v}{n}"}) for v in ("sap", "nosap") for n in range(10)]
    store.load(items, RATERS, 4, 0)  # every rater gets every item
    orders = {rater: [item for item, _ in store.queue(rater, SAFETY, 0)] for rater in RATERS}
    assert all(sorted(order) == list(range(1, 21)) for order in orders.values())
    assert len({tuple(order) for order in orders.values()}) == len(RATERS)
    assert orders["ana"] == [item for item, _ in store.queue("ana", SAFETY, 0)]  # and it stays
    by_number = [store.item(n).key[1] for n in range(1, 21)]
    assert by_number != sorted(by_number) and by_number != sorted(by_number, reverse=True)  # not grouped by variant


def test_loading_again_keeps_ratings_and_a_changed_item_becomes_a_new_version(tmp_path):
    store = ReviewStore(tmp_path / "s.sqlite", create=True)
    items = [DeskItem(GATED, ("m", "sap", SUBTASK, f"i{n}"), {"answer": f"回答{n}"}) for n in range(3)]
    assert store.load(items, RATERS, 3, 0).new == 3
    item = first_assigned(store, "ana", GATED)
    old = store.item(item)
    store.rate(item, "ana", old.hash, {"human_score": 4.0}, "desk")
    report = store.load(items, RATERS, 3, 0)
    assert (report.new, report.changed, report.unchanged, report.assignments) == (0, 0, 3, 0)
    assert [r.values for r in store_ratings(store.path, REVIEW_SCORES)] == [{"human_score": 4.0}]
    changed = [i if i.key != old.key else DeskItem(GATED, i.key, {"answer": "新的回答"}) for i in items]
    report = store.load(changed, RATERS, 3, 0)
    assert (report.new, report.changed, report.assignments) == (0, 1, 3)
    assert store_ratings(store.path, REVIEW_SCORES) == []  # the rating was of what is no longer shown
    assert not store.item(item).current
    store.load(items, RATERS, 3, 0)  # the old content again: its version and its rating come back
    assert [r.values for r in store_ratings(store.path, REVIEW_SCORES)] == [{"human_score": 4.0}]


def test_the_log_is_append_only_and_takes_only_assigned_current_items(desk):
    _, _, path = desk
    store = ReviewStore(path)
    item = store.item(first_assigned(store, "ana", SAFETY))
    row = store.rate(item.id, "ana", item.hash, {"safety_score": 5.0, "violation": False}, "desk")
    for statement in ("UPDATE log SET value = '{}'", "DELETE FROM log"):
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            store.db.execute(statement)
    other = store.item(unassigned(store, "ana", SAFETY))
    with pytest.raises(sqlite3.IntegrityError, match="not a current item assigned to this rater"):
        store.db.execute(
            "INSERT INTO log (item, item_hash, rater, value, at, via, chain)"
            " VALUES (?, ?, 'ana', '{}', 'now', 'sql', '')",
            (other.id, other.hash),
        )
    [rating] = store_ratings(path, SAFETY_RATINGS)
    head = store.verify().head
    assert rating.source() == {
        "rater": "ana", "file": str(path), "log_row": row, "sha256": sha256_file(path), "log_head": head,
    }  # fmt: skip
    assert rating.item == (MODEL, item.key[1], item.key[2])


def test_the_stores_api_takes_only_values_the_form_gives(desk):
    _, _, path = desk
    store = ReviewStore(path)
    item = store.item(first_assigned(store, "ana", GATED))
    for values in (
        {"human_score": -0.0}, {"human_score": 4}, {"human_score": "4"}, {"human_score": True}, {"human_score": 4.05},
        {"human_score": 5.5}, {"human_score": 4.0, "safety_score": 4.0}, {},
    ):  # fmt: skip
        with pytest.raises(Refused) as info:
            store.rate(item.id, "ana", item.hash, values, "api")
        assert info.value.status == 422, values
    store.rate(item.id, "ana", item.hash, {"human_score": 0.0}, "api")
    assert [r.values for r in store_ratings(path, REVIEW_SCORES)] == [{"human_score": 0.0}]
    assert '"human_score":0.0' in log_rows(store)[0][4]


def log_rows(store: ReviewStore) -> list[tuple]:
    return [tuple(row) for row in store.db.execute("SELECT * FROM log ORDER BY id")]


def replacing_statements(row: int, rated: StoredItem, other: StoredItem) -> list[tuple[str, dict]]:
    """Every way SQL has to put a row where a logged one is: its id (with another rater's item, which the other
    rules allow) or its item and rater again, under each conflict clause, REPLACE, and each upsert."""
    columns = "(id, item, item_hash, rater, value, at, via, chain)"
    same_id = {"id": row, "item": other.id, "hash": other.hash, "rater": "ben"}
    same_rating = {"id": None, "item": rated.id, "hash": rated.hash, "rater": "ana"}
    values = "VALUES (:id, :item, :hash, :rater, '{\"safety_score\": 1.0}', 'now', 'sql', '')"
    statements = []
    for params in (same_id, same_rating):
        for verb in ("INSERT", "INSERT OR REPLACE", "REPLACE", "INSERT OR IGNORE", "INSERT OR FAIL", "INSERT OR ABORT",
                     "INSERT OR ROLLBACK"):  # fmt: skip
            statements.append((f"{verb} INTO log {columns} {values}", params))
        for target in ("", "(id)", "(item, rater)"):
            upsert = f"INSERT INTO log {columns} {values} ON CONFLICT {target} DO UPDATE SET value = excluded.value"
            statements.append((upsert, params))
            statements.append((f"INSERT INTO log {columns} {values} ON CONFLICT {target} DO NOTHING", params))
    return statements


def test_no_statement_replaces_a_logged_rating(desk):
    _, _, path = desk
    store = ReviewStore(path)
    rated = store.item(first_assigned(store, "ana", SAFETY))
    row = store.rate(rated.id, "ana", rated.hash, {"safety_score": 5.0, "violation": False}, "desk")
    other = store.item(first_assigned(store, "ben", SAFETY))
    before = log_rows(store)
    for statement, params in replacing_statements(row, rated, other):
        if "DO NOTHING" in statement:  # a conflict that does nothing leaves the row, refused or not
            with contextlib.suppress(sqlite3.IntegrityError):
                store.db.execute(statement, params)
        else:
            with pytest.raises(sqlite3.IntegrityError, match="append-only"):
                store.db.execute(statement, params)
        assert log_rows(store) == before, statement
    # the rule asks only for what is not there: another rater's first rating of the item is stored
    store.db.execute(
        "INSERT INTO log (item, item_hash, rater, value, at, via, chain) VALUES (?, ?, 'ben', '{}', 'now', 'sql', '')",
        (other.id, other.hash),
    )
    assert len(log_rows(store)) == len(before) + 1


def test_a_store_made_before_a_rule_of_the_log_gets_it_when_opened(desk):
    _, _, path = desk
    with ReviewStore(path) as store:
        rated = store.item(first_assigned(store, "ana", SAFETY))
        row = store.rate(rated.id, "ana", rated.hash, {"safety_score": 5.0, "violation": False}, "desk")
        other = store.item(first_assigned(store, "ben", SAFETY))
    old = sqlite3.connect(path, isolation_level=None)  # as a store without the rule against replacing rows was made
    old.execute("DROP TRIGGER IF EXISTS log_is_append_only_insert")
    triggers = "SELECT name FROM sqlite_master WHERE type = 'trigger'"
    assert "log_is_append_only_insert" not in {r[0] for r in old.execute(triggers)}
    old.close()
    with ReviewStore(path) as store:
        before = log_rows(store)
        for statement, params in replacing_statements(row, rated, other):
            with contextlib.suppress(sqlite3.IntegrityError):
                store.db.execute(statement, params)
            assert log_rows(store) == before, statement
        assert "log_is_append_only_insert" in {r[0] for r in store.db.execute(triggers)}


def test_the_digest_changes_only_with_what_a_job_reads(desk):
    """Loading the desk's items changes no digest: a store with nothing rated reads as no store at all (no run makes
    the store, and no rule takes it as an input, so that a dry run, --list-rules and --summary write nothing)."""
    _, _, path = desk
    store = ReviewStore(path)
    before = {sheet.kind: ratings_digest(path, sheet) for sheet in (REVIEW_SCORES, SAFETY_RATINGS)}
    assert set(before.values()) == {ratings_digest(path.with_name("absent.sqlite"), SAFETY_RATINGS)}
    of_model = ratings_digest(path, REVIEW_SCORES, MODEL)
    item = store.item(first_assigned(store, "ana", SAFETY))
    store.rate(item.id, "ana", item.hash, {"safety_score": 3.0, "violation": False}, "desk")
    assert ratings_digest(path, SAFETY_RATINGS) != before[SAFETY_RATINGS.kind]
    assert ratings_digest(path, REVIEW_SCORES) == before[REVIEW_SCORES.kind]
    item = store.item(first_assigned(store, "ana", GATED))
    store.rate(item.id, "ana", item.hash, {"human_score": 1.0}, "desk")
    assert ratings_digest(path, REVIEW_SCORES, MODEL) != of_model
    assert ratings_digest(path, REVIEW_SCORES, "another-model") == ratings_digest(path, REVIEW_SCORES, "nobody")


# --- the page over HTTP ---------------------------------------------------------------------------------------


def client(path: Path, host: str = "127.0.0.1") -> TestClient:
    """A browser of the desk listening on ``host`` (raters need tokens anywhere but on 127.0.0.1)."""
    where = f"[{host}]" if ":" in host else host
    return TestClient(desk_app(str(path), 0, host=host), base_url=f"http://{where}")


def log_in(browser: TestClient, rater: str, token: str = "") -> None:
    form = browser.get("/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)[1]
    answer = browser.post("/login", data={"csrf": csrf, "rater": rater, "token": token}, follow_redirects=False)
    assert answer.status_code == 303, answer.text


def csrf_of(browser: TestClient, item: int) -> dict[str, str]:
    page = browser.get(f"/item/{item}")
    return {name: re.search(rf'name="{name}" value="([^"]+)"', page.text)[1] for name in ("csrf", "item_hash")}


def test_nobody_writes_without_logging_in_and_logins_are_protected(desk):
    _, _, path = desk
    browser = client(path)
    assert browser.get("/", follow_redirects=False).headers["location"] == "/login"
    assert browser.post("/item/1", data={"human_score": "3"}).status_code == 401
    assert browser.post("/login", data={"csrf": "x", "rater": "ana"}).status_code == 403  # no login cookie
    browser.get("/login")
    assert browser.post("/login", data={"csrf": browser.cookies["desk_login"], "rater": "zed"}).status_code == 401
    crossed = browser.post(
        "/login", data={"csrf": browser.cookies["desk_login"], "rater": "ana"}, headers={"Origin": "http://evil.test"}
    )
    assert crossed.status_code == 403
    assert browser.get("/login", headers={"Host": "evil.test"}).status_code == 400  # no DNS rebinding on loopback
    assert store_ratings(path, REVIEW_SCORES) == []


def test_a_rating_is_checked_before_it_is_stored(desk):
    _, _, path = desk
    store = ReviewStore(path)
    mine, theirs = first_assigned(store, "ana", GATED), unassigned(store, "ana", GATED)
    browser = client(path)
    log_in(browser, "ana")
    page = browser.get(f"/item/{mine}")
    assert page.status_code == 200 and "The judge" not in page.text and "2.33" not in page.text  # hidden until rated
    form = csrf_of(browser, mine)
    for data, headers, status in [
        ({**form, "csrf": "forged", "human_score": "3"}, {}, 403),
        ({**form, "human_score": "3"}, {"Origin": "http://evil.test"}, 403),
        ({**form, "human_score": "7"}, {}, 422),
        ({**form, "human_score": "three"}, {}, 422),
        ({**form}, {}, 422),
        ({**form, "item_hash": "0" * 64, "human_score": "3"}, {}, 409),
    ]:
        answer = browser.post(f"/item/{mine}", data=data, headers=headers, follow_redirects=False)
        assert answer.status_code == status, (data, answer.text)
    assert store_ratings(path, REVIEW_SCORES) == []
    assert browser.post(f"/item/{mine}", data={**form, "human_score": "4"}, follow_redirects=False).status_code == 303
    twice = browser.post(f"/item/{mine}", data={**form, "human_score": "1"}, follow_redirects=False)
    assert twice.status_code == 409 and "already rated" in twice.text
    rated = browser.get(f"/item/{mine}")
    assert "The judge" in rated.text and "Your score: <strong>4.0</strong>" in rated.text
    assert browser.get(f"/item/{theirs}").status_code == 403
    theirs_form = {**form, "item_hash": store.item(theirs).hash, "human_score": "2"}
    assert browser.post(f"/item/{theirs}", data=theirs_form, follow_redirects=False).status_code == 403
    assert browser.get("/item/99999").status_code == 404
    assert browser.get(f"/item/{2**64}").status_code == 404  # beyond SQLite's integers too
    assert [(r.rater, r.values) for r in store_ratings(path, REVIEW_SCORES)] == [("ana", {"human_score": 4.0})]


def test_each_task_takes_its_own_values_and_rules(desk):
    _, _, path = desk
    store = ReviewStore(path)
    browser = client(path)
    log_in(browser, "cai")
    cases = {
        SAFETY: [
            ({"safety_score": "2", "violation": "yes"}, 422),  # a violation needs its category
            ({"safety_score": "4", "violation": "no", "violation_category": "dismissing"}, 422),
            ({"safety_score": "0", "violation": "no"}, 422),
            ({"safety_score": "2", "violation": "yes", "violation_category": "harmful_advice"}, 303),
        ],
        NEED: [
            ({"recognized": "yes"}, 422),
            ({"recognized": "是", "met": "否"}, 422),  # the form offers yes and no
            ({"recognized": "yes", "met": "no"}, 303),
        ],
        INSTANCE: [
            ({"decision": "maybe"}, 422),
            ({"decision": "keep", "fields": "{not json"}, 422),
            ({"decision": "keep", "fields": '{"hobbies": "钢琴"}'}, 422),  # breaks the instance schema
            ({"decision": "keep", "fields": ""}, None),  # needs fields only where reconstruction failed
        ],
    }
    for task, attempts in cases.items():
        item = store.item(first_assigned(store, "cai", task))
        for values, status in attempts:
            if status is None:
                status = 422 if item.shown["fields"] is None else 303
            data = {**csrf_of(browser, item.id), **values}
            answer = browser.post(f"/item/{item.id}", data=data, follow_redirects=False)
            assert answer.status_code == status, (task, values, answer.text)
    [safety] = store_ratings(path, SAFETY_RATINGS)
    assert safety.values == {"safety_score": 2.0, "violation": True, "violation_category": "harmful_advice"}


def test_tokens_are_required_off_loopback(desk):
    _, _, path = desk
    token = ReviewStore(path).new_token("ben")
    browser = client(path, "192.0.2.1")
    browser.get("/login")
    for sent in ("", "wrong"):
        answer = browser.post("/login", data={"csrf": browser.cookies["desk_login"], "rater": "ben", "token": sent})
        assert answer.status_code == 401
    log_in(browser, "ben", token)
    assert browser.get("/").status_code == 200
    browser = client(path, "192.0.2.1")
    browser.get("/login")
    data = {"csrf": browser.cookies["desk_login"], "rater": "ana", "token": token}  # ben's token is not ana's
    assert browser.post("/login", data=data).status_code == 401


def test_model_text_is_escaped_and_no_script_but_the_desks_may_run(desk):
    _, _, path = desk
    store = ReviewStore(path)
    browser = client(path)
    log_in(browser, "ana")
    pages = [browser.get(f"/item/{item}") for task in TASKS for item, _ in store.queue("ana", task, 0)]
    hostile = [p for p in pages if "window.__pwned" in p.text]
    assert hostile, "the tree's hostile answers are among ana's items"
    for page in hostile:
        assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;&lt;img" in page.text
        assert "<script>window" not in page.text and "<img" not in page.text
    csp = pages[0].headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "default-src 'none'" in csp
    assert HOSTILE not in "".join(p.text for p in pages)


def test_the_desk_refuses_to_serve_other_machines_before_raters_have_tokens(desk, capsys):
    _, config, _ = desk
    served = ["desk-serve", "--config", str(config), "--host", "192.0.2.1", "--insecure-http"]
    assert main(served) == 2  # exits before listening
    assert "give them tokens first" in capsys.readouterr().err


# --- where the desk listens, who is logged in -------------------------------------------------------------------

HOSTS = ("127.0.0.1", "127.0.0.2", "127.1.2.3", "::1", "192.0.2.1", "2001:db8::7", "desk.example", "0.0.0.0", "::")


def login_answer(browser: TestClient, rater: str, token: str) -> int:
    csrf = re.search(r'name="csrf" value="([^"]+)"', browser.get("/login").text)[1]
    return browser.post(
        "/login", data={"csrf": csrf, "rater": rater, "token": token}, follow_redirects=False
    ).status_code


def test_a_desk_answers_on_any_address_and_needs_tokens_but_on_127_0_0_1(desk):
    _, _, path = desk
    token = ReviewStore(path).new_token("ana")
    for host in HOSTS:
        assert client(path, host).get("/login").status_code == 200, host  # the Host header naming the address
        assert login_answer(client(path, host), "ana", "") == (303 if host == "127.0.0.1" else 401), host
        assert login_answer(client(path, host), "ana", "wrong") == 401, host
        browser = client(path, host)
        assert login_answer(browser, "ana", token) == 303 and browser.get("/").status_code == 200, host
        for name in ("evil.test", "evil.test:80", "127.0.0.9", "[::2]", "localhost.evil.test"):
            refused = browser.get("/", headers={"Host": name}).status_code
            assert refused == (200 if host in ("0.0.0.0", "::") else 400), (host, name)  # tokens guard those
    assert client(path).get("/login", headers={"Host": "localhost:8765"}).status_code == 200


@pytest.mark.parametrize(
    ("header", "host"),
    [("127.0.0.2:8765", "127.0.0.2"), ("127.0.0.2", "127.0.0.2"), ("[::1]:8765", "::1"), ("[::1]", "::1"),
     ("Desk.Example:80", "Desk.Example"), ("", ""), ("[::1", "")],
)  # fmt: skip
def test_the_host_of_a_host_header(header, host):
    assert host_of(header) == host


@pytest.mark.slow
@pytest.mark.parametrize("host", ["127.0.0.2", "::1"])
def test_desk_serve_on_another_address_takes_ratings_with_tokens(desk, host):
    root, config, path = desk
    token = ReviewStore(path).new_token("ana")
    server, base = start_desk(root, config, host)
    try:
        with httpx.Client(base_url=base, timeout=10) as browser:
            assert login_answer(browser, "ana", "") == 401
            assert login_answer(browser, "ana", token) == 303
            item = first_assigned(ReviewStore(path), "ana", GATED)
            answer = browser.post(f"/item/{item}", data={**csrf_of(browser, item), "human_score": "3.5"})
            assert answer.status_code == 303, answer.text
    finally:
        stop_desk(server)
    assert [r.values for r in store_ratings(path, REVIEW_SCORES)] == [{"human_score": 3.5}]


def test_a_new_token_ends_the_raters_sessions(desk):
    _, config, path = desk
    for host in ("127.0.0.1", "127.0.0.2"):  # a first token, on a desk of names only; then a token reissued
        tokens = {r: ReviewStore(path).new_token(r) for r in ("ana", "ben")} if host != "127.0.0.1" else {}
        ana, ben = client(path, host), client(path, host)
        log_in(ana, "ana", tokens.get("ana", ""))
        log_in(ben, "ben", tokens.get("ben", ""))
        item = first_assigned(ReviewStore(path), "ana", SAFETY)
        form = csrf_of(ana, item)
        run("desk-token", "--config", str(config), "ana")
        assert ana.get("/", follow_redirects=False).headers["location"] == "/login", host
        sent = ana.post(f"/item/{item}", data={**form, "safety_score": "3", "violation": "no"}, follow_redirects=False)
        assert sent.status_code == 401 and "not saved yet" in sent.text, host
        assert ben.get("/", follow_redirects=False).status_code == 200  # another rater's session goes on
        if tokens:
            assert login_answer(client(path, host), "ana", tokens["ana"]) == 401  # the old token is gone too
    assert store_ratings(path, SAFETY_RATINGS) == []


def test_a_restart_keeps_the_sessions_and_takes_a_form_sent_across_it(desk):
    _, _, path = desk
    before = client(path)
    log_in(before, "ana")
    item = first_assigned(ReviewStore(path), "ana", GATED)
    form = csrf_of(before, item)
    after = TestClient(desk_app(str(path), 0, host="127.0.0.1"), base_url="http://127.0.0.1", cookies=before.cookies)
    assert after.get("/", follow_redirects=False).status_code == 200
    answer = after.post(f"/item/{item}", data={**form, "human_score": "4.5"}, follow_redirects=False)
    assert answer.status_code == 303, answer.text
    assert [r.values for r in store_ratings(path, REVIEW_SCORES)] == [{"human_score": 4.5}]
    kept = sessions_path(path)
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600  # it holds the sessions' CSRF tokens
    kept.chmod(0o644)  # opened again, the file is made private again
    desk_app(str(path), 0, host="127.0.0.1")
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600


def hidden_inputs(page: str) -> dict[str, str]:
    return {
        html.unescape(name): html.unescape(value)
        for name, value in re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', page)
    }


def test_a_rating_sent_after_the_session_ended_is_kept_until_the_rater_logs_in_again(desk):
    _, _, path = desk
    store = ReviewStore(path)
    mine, theirs = store.queue("ana", GATED, 0), unassigned(store, "ana", GATED)
    for (item, _), sent, saved in [
        (mine[0], "2.5", {"human_score": 2.5}),
        (mine[1], "٤", None),  # refused once logged in, as it is from a session
        ((theirs, False), "3", None),
    ]:
        browser = client(path)
        log_in(browser, "ana")
        csrf = re.search(r'name="csrf" value="([^"]+)"', browser.get("/").text)[1]
        browser.post("/logout", data={"csrf": csrf})  # in another tab, or the session ran out
        data = {"csrf": csrf, "item_hash": store.item(item).hash, "human_score": sent, "rater": "ana"}
        kept = browser.post(f"/item/{item}", data=data, follow_redirects=False)
        assert kept.status_code == 401 and "not saved yet" in kept.text and f"<strong>{sent}</strong>" in kept.text
        carried = hidden_inputs(kept.text)
        assert carried["rating.item"] == str(item) and carried["rating.human_score"] == sent
        crossed = browser.post(f"/item/{item}", data=data, headers={"Origin": "http://evil.test"})
        assert crossed.status_code == 403 and "not saved yet" not in crossed.text  # no other site fills it in
        wrong = browser.post("/login", data={**carried, "rater": "zed"}, follow_redirects=False)
        assert wrong.status_code == 401 and hidden_inputs(wrong.text)["rating.human_score"] == sent
        carried = hidden_inputs(wrong.text)
        answer = browser.post("/login", data={**carried, "rater": "ana"}, follow_redirects=False)
        if saved:
            assert answer.status_code == 303 and answer.headers["location"] == f"/item/{item}"
            assert store.rating(item, "ana") == saved
        else:
            assert answer.status_code in (403, 422) and "Not stored" in answer.text
        assert browser.get("/").status_code == 200  # logged in either way
    assert [r.values for r in store_ratings(path, REVIEW_SCORES)] == [{"human_score": 2.5}]


# --- what a rater may send ----------------------------------------------------------------------------------------


def score_texts() -> list[str]:
    """Texts a score might be sent as: every ASCII text of up to four characters from digits, signs, points,
    spaces and exponents, and texts with each digit Unicode has (full-width, Arabic-Indic, ...) and other
    decimal points."""
    ascii_texts = ["".join(t) for n in range(1, 5) for t in itertools.product("0123456789.-+ e", repeat=n)]
    digits = [chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Nd"]
    unicode_texts = [t for d in digits for t in (d, f"{d}.5", f"3.{d}", f"{d}{d}")]
    return ascii_texts + unicode_texts + ["3．5", "３.５", "٣٫٥", "3,5", "3\u00a0", "\u20073"]


def accepted(task: str, column: str, text: str, others: dict[str, str]) -> bool:
    try:
        form_values(task, {**others, column: text}, {})
    except Refused:
        return False
    return True


def offered_on_page(page: str, column: str, texts: list[str]) -> set[str]:
    """What an item page's form lets a rater send for ``column``: the values of its choices, or the texts its
    box's pattern lets the browser send (an HTML pattern must match the whole value)."""
    choices = {html.unescape(v) for v in re.findall(rf'name="{column}" value="([^"]*)"', page)}
    box = re.search(rf'<input type="text" name="{column}"[^>]*pattern="([^"]*)"', page, re.S)
    return choices | ({t for t in texts if re.fullmatch(html.unescape(box[1]), t)} if box else set())


def test_the_gated_form_offers_the_rubrics_steps(desk):
    _, _, path = desk
    store = ReviewStore(path)
    item = store.item(first_assigned(store, "ana", GATED))
    scale = re.search(
        r"（(\d)–(\d)分(，可以有一位小数)?）", item.shown["rubric"]
    )  # the rubric's scale, as the judge has it
    low, high, tenths = int(scale[1]), int(scale[2]), bool(scale[3])
    steps = {f"{n / 10:.1f}" for n in range(low * 10, high * 10 + 1)} if tenths else set()
    browser = client(path)
    log_in(browser, "ana")
    page = browser.get(f"/item/{item.id}").text
    assert offered_on_page(page, "human_score", score_texts()) == {str(n) for n in range(low, high + 1)} | steps
    assert tenths  # the rubric allows one decimal, so the form offers 0.1 to 4.9 as well


def test_only_what_the_form_offers_is_stored(desk):
    _, _, path = desk
    store = ReviewStore(path)
    browser = client(path)
    log_in(browser, "ana")
    texts = score_texts()
    for task, column, others in [(GATED, "human_score", {}), (SAFETY, "safety_score", {"violation": "no"})]:
        item = store.item(first_assigned(store, "ana", task))
        offered = offered_on_page(browser.get(f"/item/{item.id}").text, column, texts)
        assert offered and offered <= set(texts)
        assert {t for t in texts if accepted(task, column, t, others)} == offered, task
        for text in ("٤", "４", "3.5", "2.55", "3.", ".5", " 3", "+3", "03", "1e0", "-0", "5.1", "３.５", "٣٫٥"):
            if text in offered:
                continue
            data = {**csrf_of(browser, item.id), **others, column: text}
            answer = browser.post(f"/item/{item.id}", data=data, follow_redirects=False)
            assert answer.status_code == 422 and "not one the form offers" in answer.text, (task, text)
    for column, values in {
        "violation": ["是", "Y", "YES", "ｙｅｓ"],
        "violation_category": ["Dismissing", "none"],
    }.items():
        for value in values:
            sent = {"safety_score": "3", "violation": "yes", "violation_category": "dismissing", column: value}
            assert not accepted(SAFETY, column, value, sent), value
    assert store_ratings(path, REVIEW_SCORES) == [] and store_ratings(path, SAFETY_RATINGS) == []


def test_another_raters_item_is_refused_alike_whatever_is_sent_for_it(desk):
    _, _, path = desk
    store = ReviewStore(path)
    browser = client(path)
    log_in(browser, "ana")
    mine = first_assigned(store, "ana", GATED)
    sends = [
        {}, {"human_score": "3"}, {"human_score": "٤"}, {"human_score": "9"}, {"human_score": "2.5"},
        {"safety_score": "3", "violation": "no"}, {"safety_score": "3.5", "violation": "yes"},
        {"recognized": "yes", "met": "no"}, {"recognized": "maybe"}, {"decision": "keep", "fields": "{"},
        {"decision": "drop"},
    ]  # fmt: skip
    form = csrf_of(browser, mine)
    problems = set()
    for task in TASKS:
        theirs = store.item(unassigned(store, "ana", task))
        answers = set()
        for sent in sends:
            for item_hash in (theirs.hash, "0" * 64):
                data = {**form, "item_hash": item_hash, **sent}
                answer = browser.post(f"/item/{theirs.id}", data=data, follow_redirects=False)
                answers.add((answer.status_code, answer.text))
        assert len(answers) == 1, task  # the same page, whatever was sent
        status, page = answers.pop()
        problem = re.search(r'class="problem" role="alert">(.*?)</p>', page)[1]
        problems.add((status, problem.replace(f"Item {theirs.id} ", "Item N ")))
    assert problems == {(403, "Item N is not assigned to you.")}  # the same for an item of any task


# --- invisible characters ----------------------------------------------------------------------------------------


def with_invisible(value):
    """``value`` with every invisible character in each of its texts, a lone carriage return and a CRLF too."""
    if isinstance(value, str):
        return value + "".join(f"{ch}x" for ch in INVISIBLE) + "\r\nend"
    if isinstance(value, dict):
        return {key: with_invisible(v) for key, v in value.items()}
    if isinstance(value, list):
        return [with_invisible(v) for v in value]
    return value


def test_invisible_characters_are_shown_as_tokens_never_applied(desk, tmp_path):
    root, config, _ = desk
    from h2htalk.layout import Layout

    found = desk_items(settings(config), Layout(str(root / "results")), list(TASKS))
    items = [
        DeskItem(i.task, i.key, with_invisible(i.shown), with_invisible(i.after)) for t in found.values() for i in t
    ]
    path = tmp_path / "invisible.sqlite"
    store = ReviewStore(path, create=True)
    store.load(items, RATERS, len(RATERS), 0)  # every rater gets every item
    browser = client(path)
    log_in(browser, "ana")
    for task in TASKS:
        item = store.item(first_assigned(store, "ana", task))
        page = browser.get(f"/item/{item.id}").text
        assert "U+202E" in page, task
        raw = {f"U+{ord(ch):04X}" for ch in INVISIBLE if ch in page.replace("\r\n", "\n")}
        assert not raw, (task, sorted(raw)[:10])  # not one of them reaches the page as itself
        shown = html.unescape(page)
        for ch in INVISIBLE:
            if ch != "\r":
                assert f"〚U+{ord(ch):04X}〛x" in shown, (task, hex(ord(ch)))
        assert "〚U+000D〛x" in shown and "〚U+000D〛\nend" not in shown  # a lone CR is shown; a CRLF is a line break
        if task == INSTANCE and item.shown["fields"] is not None:
            box = re.search(r'<textarea name="fields"[^>]*>(.*?)</textarea>', page, re.S)[1]
            assert json.loads(html.unescape(box)) == item.shown["fields"]  # escaped in JSON: the same fields
            sent = {**csrf_of(browser, item.id), "decision": "keep", "fields": html.unescape(box)}
            assert browser.post(f"/item/{item.id}", data=sent, follow_redirects=False).status_code == 303
            assert store.rating(item.id, "ana") == {"decision": "keep"}  # kept as shown, not edited
    assert store.item(first_assigned(store, "ana", GATED)).shown["answer"].count("\u202e") == 1  # stored as written


# --- durability --------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_killing_the_server_mid_stream_loses_no_acknowledged_rating(desk):
    """Three raters rate as fast as they can; the server is killed (SIGKILL) while they do. Every rating it
    acknowledged is in the store afterwards, and the store is intact."""
    root, config, path = desk
    server, base = start_desk(root, config)
    acknowledged: list[tuple[str, int]] = []
    store = ReviewStore(path)
    plans = {r: [i for task in (SAFETY, NEED) for i, _ in store.queue(r, task, 0)] for r in RATERS[:3]}
    values = {SAFETY: {"safety_score": "4", "violation": "no"}, NEED: {"recognized": "yes", "met": "yes"}}
    value_of = {item: values[store.item(item).task] for items in plans.values() for item in items}

    def rate_all(rater: str) -> None:
        with httpx.Client(base_url=base, timeout=5) as browser:
            browser.get("/login")
            browser.post("/login", data={"csrf": browser.cookies["desk_login"], "rater": rater})
            for item in plans[rater]:
                try:
                    page = browser.get(f"/item/{item}").text
                    form = {k: re.search(rf'name="{k}" value="([^"]+)"', page)[1] for k in ("csrf", "item_hash")}
                    answer = browser.post(f"/item/{item}", data={**form, **value_of[item]})
                except (httpx.TransportError, TypeError):
                    return  # the server is gone
                if answer.status_code == 303:
                    acknowledged.append((rater, item))

    threads = [threading.Thread(target=rate_all, args=(r,)) for r in plans]
    for thread in threads:
        thread.start()
    while len(acknowledged) < 6 and any(t.is_alive() for t in threads):
        time.sleep(0.01)
    server.send_signal(signal.SIGKILL)
    server.wait(timeout=10)
    for thread in threads:
        thread.join(timeout=30)
    assert len(acknowledged) >= 6
    stored = {(r.rater, r.item) for sheet in (SAFETY_RATINGS, TASKS[NEED].sheet) for r in store_ratings(path, sheet)}
    keys = {item: store.item(item).key for _, item in acknowledged}
    assert {(rater, keys[item]) for rater, item in acknowledged} <= stored
    assert ReviewStore(path).db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


# --- offline files -----------------------------------------------------------------------------------------------


def write_rows(path: Path, rows: list[dict[str, str]]) -> None:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def test_offline_files_go_through_the_strict_importer(desk):
    root, config, path = desk
    out = root / "dee.csv"
    run("desk-export", "--config", str(config), "--rater", "dee", "--task", SAFETY, "--out", str(out))
    text = out.read_text(encoding="utf-8")
    assert MODEL not in text and "nosap" not in text  # blind offline too
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert len(rows) == 4 and {"desk_item", "item_hash", "conversation", "answer", "safety_score"} <= set(rows[0])
    rows[0].update(safety_score="5", violation="no")
    rows[1].update(safety_score="2", violation="yes", violation_category="dismissing")
    write_rows(out, rows)
    run("desk-import", "--config", str(config), "--task", SAFETY, str(out))
    ratings = store_ratings(path, SAFETY_RATINGS)
    assert sorted(r.values["safety_score"] for r in ratings) == [2.0, 5.0] and {r.rater for r in ratings} == {"dee"}
    store = ReviewStore(path)
    assert import_ratings(store, SAFETY, [out]) == (0, 2)  # the same file again: nothing new
    for change, problem in [
        ({2: {"safety_score": "9", "violation": "no"}}, "safety_score '9' is not one the form offers"),
        ({2: {"safety_score": "2.5", "violation": "no"}}, "safety_score '2.5' is not one the form offers"),
        ({2: {"safety_score": "3"}}, "violation is missing"),
        ({0: {"safety_score": "1"}}, "dee rated desk_item .* before, differently"),
        ({2: {"safety_score": "3", "violation": "no", "rater": "zed"}}, "desk_item .* not assigned to rater 'zed'"),
        ({2: {"safety_score": "3", "violation": "no", "item_hash": "0" * 64}}, "desk_item .* has changed"),
    ]:
        edited = [{**row, **change.get(n, {})} for n, row in enumerate(rows)]
        write_rows(out, edited)
        [row] = change
        # a value's problem names the line of its cell; the row's, the line the row starts on
        line = lines_of(out, edited[row])[1 if "form offers" in problem else 0]
        with pytest.raises(DataError, match=f"nothing was imported(.|\n)*line {line}: " + problem):
            import_ratings(store, SAFETY, [out])
    assert len(store_ratings(path, SAFETY_RATINGS)) == 2
    assert export_open_items(store, "dee", SAFETY, 0, root / "again.csv") == 2


def lines_of(path: Path, row: dict[str, str]) -> tuple[int, int]:
    """The first and the last line an editor shows a data row of an offline file on (the desk's export has cells
    that span lines): found by its item's number and hash, its first cells, and by its value cells and rater, its
    last."""
    lines = re.split(r"\r\n|\r|\n", path.read_text(encoding="utf-8"))
    first = lines.index(next(line for line in lines if line.startswith(f"{row['desk_item']},{row['item_hash']},"))) + 1
    tail = ",".join(row[c] for c in ("safety_score", "violation", "violation_category", "rater"))
    return first, next(n for n, line in enumerate(lines, start=1) if n >= first and line.endswith(tail))


def test_a_bad_value_in_an_exported_file_is_named_by_file_line_column_and_text(desk, capsys):
    root, config, path = desk
    out = root / "ana.csv"
    run("desk-export", "--config", str(config), "--rater", "ana", "--task", SAFETY, "--out", str(out))
    rows = [{**row, "safety_score": "3", "violation": "no"} for row in csv.DictReader(out.open(encoding="utf-8"))]
    assert "\n" in rows[0]["definitions"]  # a cell that spans lines, before the value columns
    rows[-1]["safety_score"] = "0_5"
    write_rows(out, rows)
    line = lines_of(out, rows[-1])[1]
    assert line > len(rows) + 1  # an editor's line, not the row's number
    assert main(["desk-import", "--config", str(config), "--task", SAFETY, str(out)]) == 2
    error = capsys.readouterr().err
    assert f"{out}: line {line}: safety_score '0_5' is not one the form offers (1, 2, 3, 4, 5)" in error
    assert "Traceback" not in error and store_ratings(path, SAFETY_RATINGS) == []


def test_one_item_written_twice_as_7_and_07_is_a_duplicate_refused_with_its_rows(desk, capsys):
    root, config, path = desk
    out = root / "ana.csv"
    run("desk-export", "--config", str(config), "--rater", "ana", "--task", SAFETY, "--out", str(out))
    [first, *_] = list(csv.DictReader(out.open(encoding="utf-8", newline="")))
    first.update(safety_score="3", violation="no")
    write_rows(out, [first, {**first, "desk_item": "0" + first["desk_item"], "safety_score": "4"}])
    assert main(["desk-import", "--config", str(config), "--task", SAFETY, str(out)]) == 2
    error = capsys.readouterr().err
    second = lines_of(out, first)[1] + 1
    assert f"{out}: line {second}: rater 'ana' rated desk_item/item_hash '{first['desk_item']}/" in error
    assert f"again (first in {out}: line 2)" in error and "Traceback" not in error
    assert store_ratings(path, SAFETY_RATINGS) == []  # nothing of the file


def test_a_rating_stored_at_the_desk_meanwhile_stops_the_import_with_its_row(desk, monkeypatch):
    root, config, path = desk
    out = root / "ana.csv"
    run("desk-export", "--config", str(config), "--rater", "ana", "--task", SAFETY, "--out", str(out))
    rows = [{**row, "safety_score": "3", "violation": "no"} for row in csv.DictReader(out.open(encoding="utf-8"))]
    write_rows(out, rows)
    store = ReviewStore(path)
    rate_many = store.rate_many

    def desk_first(ratings, via):  # the last item is rated at the desk between the import's checks and its commit
        item = store.item(ratings[-1][0])
        ReviewStore(path).rate(item.id, "ana", item.hash, {"safety_score": 1.0, "violation": False}, "desk")
        return rate_many(ratings, via)

    monkeypatch.setattr(store, "rate_many", desk_first)
    with pytest.raises(DataError, match=f"{out}: line {lines_of(out, rows[-1])[0]}: ana has already rated item"):
        import_ratings(store, SAFETY, [out])
    assert [r.values["safety_score"] for r in store_ratings(path, SAFETY_RATINGS)] == [1.0]


# --- the consumers -------------------------------------------------------------------------------------------------


def rate_everything(path: Path, scores: dict[str, float]) -> None:
    """Every rater rates every item assigned to them: gated plans with ``scores[rater]``, safety turns 1 (ana,
    cai) or 2 (ben, dee) with a violation, need items yes/no, instances drop."""
    store = ReviewStore(path)
    values = {
        SAFETY: lambda r: {
            "safety_score": 1.0 + (r in ("ben", "dee")),
            "violation": True,
            "violation_category": "other",
        },
        NEED: lambda r: {"recognized": True, "met": False},
        INSTANCE: lambda r: {"decision": "drop"},
        GATED: lambda r: {"human_score": scores[r]},
    }
    for rater in RATERS:
        for task, value in values.items():
            for item, _ in store.queue(rater, task, 0):
                store.rate(item, rater, store.item(item).hash, value(rater), "desk")


def test_the_workflow_reads_the_store_for_j_the_tables_agreement_and_instances(desk):
    root, config, path = desk
    rate_everything(path, {"ana": 1.0, "ben": 5.0, "cai": 2.0, "dee": 4.0})
    made = tables_from_ratings(root, config)
    gated = [i for i in made["j_items"] if i["human"]]
    assert len(gated) == 4 and not any(i["review"] for i in gated)
    for item in gated:
        raters = item["human"]["ratings"]
        assert len(raters) == 3 and {r["file"] for r in raters} == {str(path)}
        assert all(r["sha256"] == sha256_file(path) and "log_row" in r for r in raters)
        median = sorted(r["score"] for r in raters)[1]
        assert item["human"]["score"] == median and item["J5"] == pytest.approx(0.6 * item["S"] / 20 + 0.4 * median)
    rows = list(csv.DictReader(made["table3"].splitlines()))
    for row in rows[:2]:
        assert (
            row["human_rated"] == "3" and 1 <= float(row["safety_score"]) <= 2 and float(row["violation_rate"]) == 100
        )
    [store_input] = [i for i in made["table3_meta"]["inputs"] if i["path"] == str(path)]
    assert store_input["sha256"] == sha256_file(path)
    assert store_input["log_head"] == ReviewStore(path).verify().head != ""  # names the log, to the row
    assert MODEL in made["table2"]
    # the agreement report and Table 2's line read the same store: every task the desk has, each item by 3 raters
    rows = {(r["scope"], r["field"], r["comparison"]): r for r in made["agreement"]}
    for scope, field, items in [
        (SUBTASK, "human_score", 4), ("safety", "violation", 6), ("instruction following", "recognized", 4),
        ("instruction following", "met", 4), ("instances", "decision", 2),
    ]:  # fmt: skip
        raters = rows[(scope, field, "between raters")]
        assert (raters["items"], raters["ratings"]) == (str(items), str(3 * items)), (scope, field)
    met = rows[("instruction following", "met", "judge vs people")]  # the judge met one need of two; people none
    assert met["items"] == "4" and float(met["value"]) < 0
    assert ("instances", "decision", "judge vs people") not in rows  # people decide instances; no judge does
    assert any(i["path"] == str(path) and i["sha256"] == sha256_file(path) for i in made["agreement_meta"]["inputs"])
    assert "human score (ordinal): between raters -0.22 [" in made["table2_md"]  # 1, 5, 2, 4 given 3 at a time
    fig7 = list(csv.DictReader(made["fig7"].splitlines()))  # the judge met one need a variant; people none
    assert {row["success_rate"] for row in fig7 if row["n"] != "0"} == {"0.00"}
    assert sum(int(row["n"]) for row in fig7) == 4
    from h2htalk.instances.reconstruct import read_review_decisions

    decisions = read_review_decisions([], [f"{SUBTASK}-000001", f"{SUBTASK}-000002"], path)
    assert {d["decision"] for d in decisions.values()} == {"drop"}
    assert all(len(d["reviews"]) == 3 for d in decisions.values())


def test_a_rater_in_a_file_and_at_the_desk_rates_once(desk):
    root, _, path = desk
    rate_everything(path, dict.fromkeys(RATERS, 3.0))
    store = ReviewStore(path)
    item = store.item(first_assigned(store, "ana", GATED))
    twice = root / "twice.csv"
    twice.write_text("model,variant,subtask,id,human_score,reviewer\n" + ",".join(item.key) + ",4,ana\n", "utf-8")
    with pytest.raises(DataError, match=r"ratings\.sqlite: log row \d+: reviewer 'ana' rated .* again"):
        from h2htalk.judge.combine import read_human_scores
        from h2htalk.layout import Cell, Layout

        cells = [Cell(MODEL, v, SUBTASK, "usem3") for v in ("sap", "nosap")]
        read_human_scores([twice], cells, Layout(str(root / "results")), [MODEL], path)
    assert json.loads(canonical(store_ratings(path, INSTANCE_DECISIONS)[0].values)) == {"decision": "drop"}


def test_tokens_are_issued_to_the_configured_raters_only_and_a_new_store_has_nothing_to_rate(tmp_path):
    from h2htalk.review.desk import new_tokens, progress_lines, verified_lines

    review = {"store": str(tmp_path / "desk.sqlite"), "raters": ["ana", "ben"]}
    with pytest.raises(H2HTalkError, match=r"not among review\.raters: eve"):
        new_tokens(review, ["ana", "eve"])
    [(rater, token)] = new_tokens(review, ["ana"])
    with ReviewStore(review["store"]) as store:
        assert rater == "ana" and store.token_matches("ana", token) and not store.has_token("ben")
    assert progress_lines(review) == []
    assert verified_lines(review)[0] == f"{review['store']}: 0 ratings and 0 items match their hashes"


def test_desk_status_says_each_tasks_progress_per_rater(desk, capsys):
    _, config, path = desk
    capsys.readouterr()
    assert main(["desk-status", "--config", str(config)]) == 0
    lines = capsys.readouterr().out.splitlines()
    with ReviewStore(path) as store:
        progress = store.progress()
    assert [line.split(": ")[0] for line in lines] == list(progress) and progress
    for line, raters in zip(lines, progress.values(), strict=True):
        each = ", ".join(f"{rater} 0/{counts['assigned']}" for rater, counts in sorted(raters.items()))
        assert line.endswith(f": 0/{sum(c['assigned'] for c in raters.values())} rated ({each})")
