"""A small content-addressed key -> bytes store in one SQLite file.

SQLite makes concurrent writers (parallel jobs sharing a cache) safe, and every ``put_many`` is one
committed transaction, so an interrupted job keeps everything it stored before. The rollback journal
(``journal_mode=DELETE``), not WAL: WAL needs shared memory between the processes, which jobs on different
nodes of a cluster's network filesystem do not have; the rollback journal needs only the file locks that
such filesystems provide. A writer takes the lock up front (``BEGIN IMMEDIATE``) and waits its turn.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable
from pathlib import Path

_CHUNK = 500  # keys per SELECT, under SQLite's bound-parameter limit
LOCK_TIMEOUT_S = 600  # how long a job waits for another job's write to finish


class SqliteStore:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # autocommit mode: transactions are opened explicitly, each write in one
        self._db = sqlite3.connect(self.path, timeout=LOCK_TIMEOUT_S, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=DELETE")
        self._db.execute("CREATE TABLE IF NOT EXISTS entries (key TEXT PRIMARY KEY, value BLOB NOT NULL)")

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        keys = list(keys)
        found: dict[str, bytes] = {}
        for start in range(0, len(keys), _CHUNK):
            chunk = keys[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            found.update(self._db.execute(f"SELECT key, value FROM entries WHERE key IN ({marks})", chunk))
        return found

    def put_many(self, items: Iterable[tuple[str, bytes]]) -> None:
        rows = list(items)
        self._db.execute("BEGIN IMMEDIATE")
        try:
            self._db.executemany("INSERT OR REPLACE INTO entries VALUES (?, ?)", rows)
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM entries").fetchone()[0])

    def close(self) -> None:
        self._db.close()
