"""A small content-addressed key -> bytes store in one SQLite file.

SQLite makes concurrent writers (parallel jobs sharing a cache) safe, and every ``put_many`` is one
committed transaction, so an interrupted job keeps everything it stored before.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable
from pathlib import Path

_CHUNK = 500  # keys per SELECT, under SQLite's bound-parameter limit


class SqliteStore:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, timeout=120)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS entries (key TEXT PRIMARY KEY, value BLOB NOT NULL)")
        self._db.commit()

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        keys = list(keys)
        found: dict[str, bytes] = {}
        for start in range(0, len(keys), _CHUNK):
            chunk = keys[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            found.update(self._db.execute(f"SELECT key, value FROM entries WHERE key IN ({marks})", chunk))
        return found

    def put_many(self, items: Iterable[tuple[str, bytes]]) -> None:
        with self._db:
            self._db.executemany("INSERT OR REPLACE INTO entries VALUES (?, ?)", list(items))

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM entries").fetchone()[0])

    def close(self) -> None:
        self._db.close()
