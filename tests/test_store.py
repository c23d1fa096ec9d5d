"""The SQLite store under concurrent jobs: several processes write one cache file and nothing is lost."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sqlite3
from pathlib import Path

import pytest

from h2htalk.store import CacheDamaged, SqliteStore

WRITERS, BATCHES, PER_BATCH = 4, 40, 25


def open_store(path: str | Path) -> SqliteStore:
    return SqliteStore(path, holds="the test's entries", redo="writes them again")


def _write(path: str, writer: int) -> int:
    """One job: reads what is there and writes its batches as its answers land; returns errors seen."""
    store = open_store(path)
    errors = 0
    try:
        for batch in range(BATCHES):
            keys = [f"w{writer}-{batch}-{i}" for i in range(PER_BATCH)]
            store.get_many([f"w{(writer + 1) % WRITERS}-{batch}-{i}" for i in range(PER_BATCH)])  # another job's
            try:
                store.put_many((key, key.encode() * 20) for key in [*keys, f"shared-{batch}"])
            except sqlite3.OperationalError:
                errors += 1
    finally:
        store.close()
    return errors


def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "cache.sqlite")
    open_store(path).close()
    with multiprocessing.get_context("spawn").Pool(WRITERS) as pool:
        errors = pool.starmap(_write, [(path, writer) for writer in range(WRITERS)])
    assert errors == [0] * WRITERS  # no "database is locked"
    store = open_store(path)
    assert len(store) == WRITERS * BATCHES * PER_BATCH + BATCHES  # every entry, the shared keys once
    sample = [f"w{w}-{b}-{i}" for w in range(WRITERS) for b in (0, BATCHES - 1) for i in (0, PER_BATCH - 1)]
    assert store.get_many(sample) == {key: key.encode() * 20 for key in sample}
    journal = sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0]
    assert journal == "delete"  # no WAL: it needs shared memory, which nodes on a network filesystem lack
    store.close()


def test_a_failed_write_keeps_what_was_committed_and_nothing_of_itself(tmp_path: Path) -> None:
    store = open_store(tmp_path / "c.sqlite")
    store.put_many([("a", b"1")])
    with pytest.raises(sqlite3.IntegrityError):
        store.put_many([("b", b"2"), ("c", None)])  # fails inside the transaction, after "b" went in
    assert store.get_many(["a", "b"]) == {"a": b"1"} and len(store) == 1
    store.put_many([("d", b"3")])  # the store is usable after the rollback
    assert len(store) == 2
    store.close()


# a disk fault: the header overwritten (not a database), the schema's pages, or a page deep in the data that
# only a check of every page finds when the file is opened
@pytest.mark.parametrize("offset", [0, 4096, 150 * 1024])
def test_a_damaged_file_is_found_when_opened_and_named(tmp_path: Path, offset: int) -> None:
    path = tmp_path / "c.sqlite"
    store = open_store(path)
    store.put_many((f"key{i}", b"v" * 1000) for i in range(300))
    store.close()
    with open(path, "r+b") as handle:
        handle.seek(offset)
        handle.write(b"\xa5" * 4096)
    with pytest.raises(CacheDamaged) as info:
        open_store(path)
    assert str(info.value).startswith(f"{path}: this cache is damaged (") and "\n" not in str(info.value)
    assert str(info.value).endswith("It holds the test's entries: delete it, and the next run writes them again")
    path.unlink()
    assert len(open_store(path)) == 0  # deleted, it starts afresh


def _write_and_die(path: str) -> None:
    """A job killed (SIGKILL) halfway through a write larger than its cache: the file changed, its journal beside it."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("BEGIN IMMEDIATE")
    db.executemany("INSERT INTO entries VALUES (?, ?)", ((f"k{i}", b"v" * 100) for i in range(50_000)))
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_read_only_look_after_a_job_killed_mid_write_reads_what_was_committed(tmp_path: Path) -> None:
    """A read-only connection cannot roll back what a killed writer left ("attempt to write a readonly
    database"): the look lets SQLite roll it back first, to the file as last committed."""
    path = tmp_path / "c.sqlite"
    store = open_store(path)
    store.put_many([("a", b"1")])
    store.close()
    writer = multiprocessing.get_context("spawn").Process(target=_write_and_die, args=(str(path),))
    writer.start()
    writer.join(60)
    assert writer.exitcode == -signal.SIGKILL and Path(f"{path}-journal").exists()
    look = SqliteStore(path, holds="the test's entries", redo="writes them again", read_only=True)
    assert look.get_many(["a", "k0"]) == {"a": b"1"} and len(look) == 1
    look.close()
