"""A small content-addressed key -> bytes store in one SQLite file.

SQLite makes concurrent writers (parallel jobs sharing a cache) safe, and every ``put_many`` is one
committed transaction, so an interrupted job keeps everything it stored before. The rollback journal
(``journal_mode=DELETE``), not WAL: WAL needs shared memory between the processes, which jobs on different
nodes of a cluster's network filesystem do not have; the rollback journal needs only the file locks that
such filesystems provide. A writer takes the lock up front (``BEGIN IMMEDIATE``) and waits its turn.

A damaged file (a disk or filesystem fault, a copy cut short) is found when a job opens it, by SQLite's
``quick_check`` (it reads every page once, without the slower cross-checks of indexes), and whenever a read
or write meets it; the error names the file, what it holds and what deleting it costs.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from h2htalk.errors import H2HTalkError

_CHUNK = 500  # keys per SELECT, under SQLite's bound-parameter limit
LOCK_TIMEOUT_S = 600  # how long a job waits for another job's write to finish
DAMAGED = ("SQLITE_CORRUPT", "SQLITE_NOTADB")  # SQLite's names for a file it cannot read as a database
PROBLEMS_SHOWN = 3  # of quick_check's list


def page_problems(db: sqlite3.Connection) -> list[str]:
    """What SQLite's ``quick_check`` finds in the file of ``db`` (every page read once), one line each, the first
    few: none where it is sound."""
    found = [row[0] for row in db.execute(f"PRAGMA quick_check({PROBLEMS_SHOWN})")]
    return [] if found == ["ok"] else [line for p in found for line in p.splitlines() if not line.startswith("***")]


def connect_read_only(
    path: str | os.PathLike[str], timeout: float = LOCK_TIMEOUT_S, **options: Any
) -> sqlite3.Connection:
    """A connection that reads the file at ``path`` as last committed and changes nothing (SQLite's ``mode=ro``).
    Where a writer stopped halfway through a transaction left its journal beside the file, SQLite first rolls it
    back, which a read-only connection cannot do ("attempt to write a readonly database"): recovery of the file as
    last committed, no change of it."""
    if os.path.exists(f"{path}-journal"):
        with contextlib.closing(sqlite3.connect(path, timeout=timeout)) as db:
            db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
    return sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True, timeout=timeout, **options)


class CacheDamaged(H2HTalkError):
    """A cache file SQLite cannot read."""


class SqliteStore:
    """``holds``: what the file holds; ``redo``: what the next run does once it is deleted (error messages)."""

    def __init__(self, path: str | os.PathLike[str], holds: str, redo: str, *, read_only: bool = False) -> None:
        self.path = Path(path)
        self.holds, self.redo = holds, redo
        if read_only:  # a look at what a file holds (the plan), changing nothing, creating nothing
            self._db = connect_read_only(self.path)
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # autocommit mode: transactions are opened explicitly, each write in one
        self._db = sqlite3.connect(self.path, timeout=LOCK_TIMEOUT_S, isolation_level=None)
        with self._readable():
            self._db.execute("PRAGMA journal_mode=DELETE")
            self._db.execute("CREATE TABLE IF NOT EXISTS entries (key TEXT PRIMARY KEY, value BLOB NOT NULL)")
            problems = page_problems(self._db)
        if problems:
            self._db.close()
            raise self._damaged("; ".join(problems))

    def _damaged(self, why: str) -> CacheDamaged:
        return CacheDamaged(
            f"{self.path}: this cache is damaged ({why}). It holds {self.holds}: delete it, and the next run"
            f" {self.redo}"
        )

    @contextlib.contextmanager
    def _readable(self) -> Iterator[None]:
        """Turn SQLite's "malformed" and "not a database" into an error that says which file and what to do."""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            if getattr(exc, "sqlite_errorname", None) in DAMAGED:
                raise self._damaged(str(exc)) from None
            raise

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        keys = list(keys)
        found: dict[str, bytes] = {}
        with self._readable():
            for start in range(0, len(keys), _CHUNK):
                chunk = keys[start : start + _CHUNK]
                marks = ",".join("?" * len(chunk))
                found.update(self._db.execute(f"SELECT key, value FROM entries WHERE key IN ({marks})", chunk))
        return found

    def put_many(self, items: Iterable[tuple[str, bytes]]) -> None:
        rows = list(items)
        with self._readable():
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany("INSERT OR REPLACE INTO entries VALUES (?, ?)", rows)
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def items(self) -> list[tuple[str, bytes]]:
        with self._readable():
            return list(self._db.execute("SELECT key, value FROM entries ORDER BY key"))

    def delete_many(self, keys: Iterable[str]) -> None:
        with self._readable():
            self._db.execute("BEGIN IMMEDIATE")
            self._db.executemany("DELETE FROM entries WHERE key = ?", [(key,) for key in keys])
            self._db.execute("COMMIT")

    def __len__(self) -> int:
        with self._readable():
            return int(self._db.execute("SELECT COUNT(*) FROM entries").fetchone()[0])

    def close(self) -> None:
        self._db.close()
