"""The SQLite store under concurrent jobs: several processes write one cache file and nothing is lost."""

from __future__ import annotations

import multiprocessing
import sqlite3
from pathlib import Path

import pytest

from h2htalk.store import SqliteStore

WRITERS, BATCHES, PER_BATCH = 4, 40, 25


def _write(path: str, writer: int) -> int:
    """One job: reads what is there and writes its batches as its answers land; returns errors seen."""
    store = SqliteStore(path)
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
    SqliteStore(path).close()
    with multiprocessing.get_context("spawn").Pool(WRITERS) as pool:
        errors = pool.starmap(_write, [(path, writer) for writer in range(WRITERS)])
    assert errors == [0] * WRITERS  # no "database is locked"
    store = SqliteStore(path)
    assert len(store) == WRITERS * BATCHES * PER_BATCH + BATCHES  # every entry, the shared keys once
    sample = [f"w{w}-{b}-{i}" for w in range(WRITERS) for b in (0, BATCHES - 1) for i in (0, PER_BATCH - 1)]
    assert store.get_many(sample) == {key: key.encode() * 20 for key in sample}
    journal = sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0]
    assert journal == "delete"  # no WAL: it needs shared memory, which nodes on a network filesystem lack
    store.close()


def test_a_failed_write_keeps_what_was_committed_and_nothing_of_itself(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "c.sqlite")
    store.put_many([("a", b"1")])
    with pytest.raises(sqlite3.IntegrityError):
        store.put_many([("b", b"2"), ("c", None)])  # fails inside the transaction, after "b" went in
    assert store.get_many(["a", "b"]) == {"a": b"1"} and len(store) == 1
    store.put_many([("d", b"3")])  # the store is usable after the rollback
    assert len(store) == 2
    store.close()
