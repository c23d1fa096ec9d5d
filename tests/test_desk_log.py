"""The review store's log, verifiable by anyone: the hash chain over the ratings, the items' hashes,
``h2htalk desk-verify`` catching rows rewritten behind the store's back, stores made before the chain, and files
that are no store (another file, one a stopped program left half made)."""

from __future__ import annotations

import hashlib
import logging
import multiprocessing
import os
import re
import signal
import socket
import sqlite3
import threading
from pathlib import Path

import pytest

from h2htalk.cli import main
from h2htalk.desk_store import store as store_module
from h2htalk.desk_store.chain import item_row_hash, link
from h2htalk.desk_store.store import (
    ReviewStore,
    canonical,
    check_store,
    log_state,
    ratings_digest,
    store_ratings,
)
from h2htalk.desk_store.tasks import NEED, SAFETY, Refused
from h2htalk.errors import ConfigError, H2HTalkError
from h2htalk.ratings import SAFETY_RATINGS

from .desk_tree import RATERS, loaded_desk, write_config

SAFE = {"safety_score": 4.0, "violation": False}


@pytest.fixture
def desk(tmp_path):
    """A loaded desk: (config file, store path)."""
    return loaded_desk(tmp_path), tmp_path / "desk" / "ratings.sqlite"


def rate_some(path: Path, count: int) -> list[int]:
    """``count`` more safety ratings, of the raters' open items in turn: their log rows."""
    rows = []
    with ReviewStore(path) as store:
        todo = [(item, rater) for rater in RATERS for item, rated in store.queue(rater, SAFETY, 0) if not rated]
        for item, rater in todo[:count]:
            rows.append(store.rate(item, rater, store.item(item).hash, SAFE, "desk"))
    return rows


def item_of(path: Path, row: int) -> int:
    """The item the rating at log ``row`` rates."""
    with ReviewStore(path) as store:
        return store.db.execute("SELECT item FROM log WHERE id = ?", (row,)).fetchone()[0]


def desk_verify(config: Path, capsys, *more: str) -> tuple[int, str]:
    """desk-verify's exit status and what it printed (its error, where it failed)."""
    status = main(["desk-verify", "--config", str(config), *more])
    out = capsys.readouterr()
    return status, out.out + out.err


def raw(path: Path, *statements: str) -> None:
    """SQL run on the store's file behind the store's back (as anyone who can write the file can)."""
    db = sqlite3.connect(path, isolation_level=None)
    for statement in statements:
        db.execute(statement)
    db.close()


def test_desk_verify_recomputes_the_chain_and_the_tables_name_its_head(desk, capsys):
    config, path = desk
    status, said = desk_verify(config, capsys)
    assert status == 0 and "0 ratings and 16 items match their hashes" in said and "(no rating yet)" in said
    rate_some(path, 2)
    early = ReviewStore(path).verify().head
    rate_some(path, 5)
    status, said = desk_verify(config, capsys)
    head = ReviewStore(path).verify().head
    assert status == 0 and "7 ratings and 16 items match their hashes" in said and f"log head {head}" in said
    assert {r.log_head for r in store_ratings(path, SAFETY_RATINGS)} == {head} == {log_state(path)["log_head"]}
    assert f"items {log_state(path)['items_sha256']}" in said
    # a head a table named before the later ratings: this log holds it
    status, said = desk_verify(config, capsys, "--head", early)
    assert status == 0 and "is the link of log row 2" in said
    status, said = desk_verify(config, capsys, "--head", "0" * 64)
    assert status == 2 and "no row of its log has the head" in said and "Traceback" not in said


def test_desk_verify_names_a_rating_rewritten_after_its_trigger_was_dropped(desk, capsys):
    config, path = desk
    rows = rate_some(path, 3)
    head = ReviewStore(path).verify().head
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        raw(path, "UPDATE log SET value = '{}'")
    changed = '{"safety_score":1.0,"violation":true,"violation_category":"harmful_advice"}'
    raw(path, "DROP TRIGGER log_is_append_only_update", f"UPDATE log SET value = '{changed}' WHERE id = {rows[1]}")
    status, said = desk_verify(config, capsys)
    assert status == 2 and f"log row {rows[1]} does not match its link" in said
    assert f"log row {rows[0]}" not in said and f"log row {rows[2]}" not in said  # the first that does not match
    # rewritten and recomputed, the log matches itself, but not the head a table named before
    with ReviewStore(path) as store:
        raw(path, "DROP TRIGGER log_is_append_only_update")
        previous = ""
        for row in store.db.execute("SELECT l.*, i.task, i.key FROM log l JOIN items i ON i.id = l.item ORDER BY l.id"):
            previous = link(previous, row, row["task"], row["key"])
            store.db.execute("UPDATE log SET chain = ? WHERE id = ?", (previous, row["id"]))
    assert desk_verify(config, capsys)[0] == 0
    status, said = desk_verify(config, capsys, "--head", head)
    assert status == 2 and f"no row of its log has the head {head}" in said


def test_desk_verify_names_an_item_edited(desk, capsys):
    config, path = desk
    rows = rate_some(path, 3)
    rated = item_of(path, rows[1])
    with ReviewStore(path) as store:
        key = store.db.execute("SELECT key FROM items WHERE id = ?", (rated,)).fetchone()[0]
        moved = canonical(["another-model", *store.item(rated).key[1:]])
    with pytest.raises(sqlite3.IntegrityError, match="an item is fixed once loaded"):
        raw(path, f"UPDATE items SET key = '{moved}' WHERE id = {rated}")
    with pytest.raises(sqlite3.IntegrityError, match="an item is kept"):
        raw(path, f"DELETE FROM items WHERE id = {rated}")
    # the rating moved to another model: the item row and the rating's link both tell
    raw(path, "DROP TRIGGER items_are_fixed", f"UPDATE items SET key = '{moved}' WHERE id = {rated}")
    status, said = desk_verify(config, capsys)
    assert status == 2 and f"items row {rated} does not match its hash" in said
    assert f"log row {rows[1]} does not match its link" in said and f"log row {rows[0]} " not in said
    raw(path, "DROP TRIGGER items_are_fixed", f"UPDATE items SET key = '{key}' WHERE id = {rated}")
    assert desk_verify(config, capsys)[0] == 0  # put back as it was
    # what it shows changed, and its row's hash recomputed: its content hash still tells
    raw(
        path,
        "DROP TRIGGER items_are_fixed",
        f"""UPDATE items SET shown = '{{"answer": "edited"}}' WHERE id = {rated}""",
    )
    with ReviewStore(path) as store:
        row = store.db.execute("SELECT * FROM items WHERE id = ?", (rated,)).fetchone()
        store.db.execute("UPDATE items SET row_sha256 = ? WHERE id = ?", (item_row_hash(row), rated))
    status, said = desk_verify(config, capsys)
    assert status == 2 and f"items row {rated}: what it shows does not match its content hash" in said


def test_a_hidden_version_and_a_removed_last_rating_are_found(desk, capsys):
    config, path = desk
    rows = rate_some(path, 3)
    rated = item_of(path, rows[0])
    raw(path, f"UPDATE items SET current = 0 WHERE id = {rated}")  # its ratings no longer count
    status, said = desk_verify(config, capsys)
    assert status == 2 and f"items row {rated} does not match its hash" in said
    raw(path, f"UPDATE items SET current = 1 WHERE id = {rated}")
    assert desk_verify(config, capsys)[0] == 0
    raw(path, "DROP TRIGGER log_is_append_only_delete", f"DELETE FROM log WHERE id = {rows[-1]}")
    status, said = desk_verify(config, capsys)
    assert status == 2 and f"log rows {rows[-1]} to {rows[-1]} were stored and are gone" in said


def as_made_before_the_chain(path: Path) -> None:
    """The store as one made before the chain: no chain column, no item hashes, no rules of theirs."""
    raw(
        path, "DROP TRIGGER log_is_chained", "DROP TRIGGER items_are_fixed", "DROP TRIGGER items_are_kept",
        "ALTER TABLE log DROP COLUMN chain", "ALTER TABLE items DROP COLUMN row_sha256",
    )  # fmt: skip


def test_a_store_made_before_the_chain_gets_it_computed_when_opened(desk, capsys, caplog):
    config, path = desk
    rate_some(path, 4)
    before = ReviewStore(path).verify()
    as_made_before_the_chain(path)
    with caplog.at_level(logging.WARNING):
        status, _ = desk_verify(config, capsys)
    assert status == 0 and "made before the rating log was chained" in caplog.text
    after = ReviewStore(path).verify()
    assert (after.head, after.items_digest, after.ratings) == (before.head, before.items_digest, 4)
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):  # its rules are back, and it goes on chaining
        raw(path, "UPDATE log SET value = '{}'")
    rate_some(path, 2)
    assert desk_verify(config, capsys)[0] == 0


def test_raters_at_once_make_one_chain_and_one_item_is_stored_once(desk):
    _, path = desk
    answers: list[str] = []

    def rater(name: str, task: str) -> None:
        with ReviewStore(path) as store:
            for item, _ in store.queue(name, task, 0):
                values = SAFE if task == SAFETY else {"recognized": True, "met": True}
                try:
                    store.rate(item, name, store.item(item).hash, values, "desk")
                    answers.append("stored")
                except Refused as exc:
                    answers.append(str(exc.status))

    # each rater twice at once (two sessions), on both tasks: every item once, the second try 409
    threads = [threading.Thread(target=rater, args=(r, t)) for r in RATERS for t in (SAFETY, NEED) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    found = ReviewStore(path).verify()
    assert found.problems == () and found.ratings == answers.count("stored") == 6 * 3 + 4 * 3
    assert answers.count("409") == found.ratings


@pytest.mark.parametrize("content", [b"", b"SQLite format 2\nnot a database\n"], ids=["empty", "another file"])
def test_a_file_that_is_no_store_is_named_and_left_as_it_is(tmp_path, capsys, content):
    config = write_config(tmp_path)
    path = tmp_path / "desk" / "ratings.sqlite"
    path.parent.mkdir()
    path.write_bytes(content)
    with pytest.raises(H2HTalkError, match=f"{path} is no review store"):
        store_ratings(path, SAFETY_RATINGS)
    status, said = desk_verify(config, capsys)
    assert status == 2 and f"{path} is no review store" in said and "Traceback" not in said, said
    assert path.read_bytes() == content and sorted(path.parent.iterdir()) == [path]


def test_a_store_left_half_made_is_named_when_read_and_completed_by_desk_load(tmp_path):
    path = tmp_path / "ratings.sqlite"
    raw(path, "CREATE TABLE raters (name TEXT PRIMARY KEY, token_sha256 TEXT, added_at TEXT NOT NULL)")
    with pytest.raises(H2HTalkError, match=r"no table items, assignments, log .*desk-load completes\)"):
        ReviewStore(path)
    with ReviewStore(path, create=True) as store:  # as desk-load opens it
        assert store.verify().problems == () and store.raters() == []


def test_a_store_is_made_whole_or_not_at_all_and_one_made_meanwhile_is_kept(tmp_path, monkeypatch):
    path, other, link = tmp_path / "desk" / "ratings.sqlite", tmp_path / "other.sqlite", os.link
    with ReviewStore(other, create=True) as store:  # what another desk-load makes meanwhile
        store.add_raters(["ann"])

    def stopped(made, to):
        raise KeyboardInterrupt  # a stop after the store was made under its temporary name, before it was placed

    monkeypatch.setattr(store_module.os, "link", stopped)
    with pytest.raises(KeyboardInterrupt):
        ReviewStore(path, create=True)
    assert list(path.parent.iterdir()) == []  # neither the store nor its temporary file

    def another_first(made, to):
        os.replace(other, to)  # the other desk-load placed its store first
        link(made, to)

    monkeypatch.setattr(store_module.os, "link", another_first)
    with ReviewStore(path, create=True) as store:
        assert store.raters() == ["ann"]
    assert list(path.parent.iterdir()) == [path]

    def no_hard_links(made, to):
        raise PermissionError(1, "Operation not permitted")  # FAT and some mounts: moved into place instead

    monkeypatch.setattr(store_module.os, "link", no_hard_links)
    elsewhere = tmp_path / "fat" / "ratings.sqlite"
    with ReviewStore(elsewhere, create=True) as store:
        assert store.verify().problems == ()
    assert list(elsewhere.parent.iterdir()) == [elsewhere]


def _make_and_die(path: str) -> None:
    """A desk-load killed (SIGKILL) after it made the store under its temporary name, before it placed it."""

    def killed(made: str, to: str) -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    store_module.os.link = killed  # this process's own
    ReviewStore(path, create=True)


def test_a_store_left_half_made_by_a_killed_process_is_removed_by_the_next_that_makes_one(tmp_path, monkeypatch):
    path = tmp_path / "desk" / "ratings.sqlite"
    maker = multiprocessing.get_context("spawn").Process(target=_make_and_die, args=(str(path),))
    maker.start()
    maker.join(60)
    assert maker.exitcode == -signal.SIGKILL
    (left,) = path.parent.iterdir()  # its temporary store, named by its machine and its process
    assert left.name.startswith(f".ratings.sqlite.{socket.gethostname()}.{maker.pid}.") and left.suffix == ".tmp"
    here, dead = socket.gethostname(), maker.pid
    kept = [  # another machine's sharing the folder, a live process's (it may still place it), no pid at all
        f"elsewhere.example.{dead}.0a0b0c0d.tmp", f"{here}.{os.getpid()}.0a0b0c0d.tmp",
        f"{here}.\u00b2.0a0b0c0d.tmp", f"{here}.{'9' * 25}.0a0b0c0d.tmp", f"{here}.{dead}.0a0b0c0d.tmp.bak",
    ]  # fmt: skip
    for name in kept:
        path.with_name(f".ratings.sqlite.{name}").write_bytes(b"")
    with ReviewStore(path, create=True) as store:
        assert store.verify().problems == ()
    kept_files = sorted([path, *(path.with_name(f".ratings.sqlite.{name}") for name in kept)])
    assert sorted(path.parent.iterdir()) == kept_files

    # with the store there: what a desk-load killed after another placed its store left, on a machine whose name
    # has dots, and SQLite's journal beside it
    monkeypatch.setattr(store_module.socket, "gethostname", lambda: "node7.cluster.example")
    for name in (f"node7.cluster.example.{dead}.1a2b3c4d.tmp", f"node7.cluster.example.{dead}.1a2b3c4d.tmp-journal"):
        path.with_name(f".ratings.sqlite.{name}").write_bytes(b"")
    unremovable = path.with_name(f".ratings.sqlite.node7.cluster.example.{dead}.5e6f7a8b.tmp")
    another_users = path.with_name(".ratings.sqlite.node7.cluster.example.424242.5e6f7a8b.tmp")
    for name in (unremovable, another_users):
        name.write_bytes(b"")
    kill = os.kill

    def running_as_another_user(pid: int, signal: int) -> None:
        if pid == 424242:
            raise PermissionError(1, "Operation not permitted")
        kill(pid, signal)

    monkeypatch.setattr(store_module.os, "kill", running_as_another_user)
    unlink = Path.unlink

    def refused(self: Path, missing_ok: bool = False) -> None:  # another user's, in a folder with the sticky bit
        if self == unremovable:
            raise PermissionError(1, "Operation not permitted")
        unlink(self, missing_ok)

    monkeypatch.setattr(Path, "unlink", refused)
    with ReviewStore(path, create=True) as store:
        assert store.verify().problems == ()
    assert sorted(path.parent.iterdir()) == sorted([*kept_files, unremovable, another_users])


def test_what_a_workflow_reads_as_it_plans_changes_no_byte_of_an_older_store(desk):
    """The load-time check and the ratings' digests read the store as it is: a dry run leaves a store made by an
    older version unchanged (a job that reads the ratings for real gives it what it lacks). The digest is the one
    earlier versions computed from the ratings the tables read, so an upgrade reruns nothing."""
    _, path = desk
    rate_some(path, 3)
    read = store_ratings(path, SAFETY_RATINGS)
    earlier = sorted(canonical([list(r.item), r.rater, r.values]) for r in read)
    assert ratings_digest(path, SAFETY_RATINGS) == hashlib.sha256("\n".join(earlier).encode()).hexdigest()
    said = ratings_digest(path, SAFETY_RATINGS)
    as_made_before_the_chain(path)
    before = path.read_bytes()
    check_store(path)
    assert ratings_digest(path, SAFETY_RATINGS) == said and path.read_bytes() == before
    assert sorted(path.parent.iterdir()) == [path]  # no journal either


def test_a_damaged_store_is_named_when_opened_whatever_page_is_damaged_and_left_as_it_is(desk, capsys):
    config, path = desk
    rate_some(path, 3)
    whole = path.read_bytes()
    pages = len(whole) // 4096
    named = rf"{re.escape(str(path))}: the review store is damaged .*put back a copy"
    for page in range(1, pages):  # the first page is the header, which names the file SQLite at all
        damaged = whole[: page * 4096] + b"\xff" * 64 + whole[page * 4096 + 64 :]
        path.write_bytes(damaged)
        for read_only in (True, False):
            with pytest.raises(H2HTalkError, match=named):
                ReviewStore(path, read_only=read_only)
        with pytest.raises(ConfigError, match=r"key 'review\.store': .*damaged"):
            check_store(path)
        status, said = desk_verify(config, capsys)
        assert status == 2 and "the review store is damaged" in said and "Traceback" not in said, page
        assert path.read_bytes() == damaged, page
    path.write_bytes(whole)
    assert desk_verify(config, capsys)[0] == 0


def _write_and_die(path: str) -> None:
    """A writer stopped halfway through a transaction (SIGKILL), past what its cache holds: the store changed, and
    the journal beside it is what SQLite rolls back."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("BEGIN IMMEDIATE")
    db.executemany("INSERT INTO raters (name, added_at) VALUES (?, ?)", [(f"r{i}", "now") for i in range(200_000)])
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_write_stopped_halfway_is_rolled_back_before_the_store_is_read_read_only(desk):
    """A read-only connection cannot roll back what a stopped writer left; SQLite once said "attempt to write a
    readonly database", read as "no review store". The store is read as last committed."""
    _, path = desk
    rate_some(path, 2)
    said = ratings_digest(path, SAFETY_RATINGS)
    writer = multiprocessing.get_context("spawn").Process(target=_write_and_die, args=(str(path),))
    writer.start()
    writer.join(60)
    journal = Path(f"{path}-journal")
    assert writer.exitcode == -signal.SIGKILL and journal.exists()
    check_store(path)
    assert ratings_digest(path, SAFETY_RATINGS) == said and not journal.exists()
    with ReviewStore(path) as store:
        assert "r0" not in store.raters()


def test_a_store_locked_past_the_timeout_is_said_to_be_unreadable_not_another_file(desk, monkeypatch):
    _, path = desk
    monkeypatch.setattr(store_module, "LOCK_TIMEOUT_S", 0.2)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        for read_only in (True, False):
            with pytest.raises(H2HTalkError, match=r"could not be read \(database is locked\)"):
                ReviewStore(path, read_only=read_only)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
