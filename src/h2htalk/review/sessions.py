"""Who is logged in at the desk: sessions kept in a SQLite file beside the store (``ratings.sqlite.sessions``
beside ``ratings.sqlite``), so that a restarted desk keeps its raters logged in, and a form a rater sends across
the restart is taken.

The cookie holds a session's id; the file holds only the id's sha256, with the rater, the session's CSRF token,
when it started and the credential it started with (``ReviewStore.credential``). A session ends when the rater
logs out, SESSION_HOURS after it started, or when the rater is given a new token. The file is created readable
and writable by its owner alone, since it holds the CSRF tokens, and kept so.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

SESSION_HOURS = 12
SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id_sha256 TEXT PRIMARY KEY,
    rater TEXT NOT NULL,
    csrf TEXT NOT NULL,
    credential TEXT NOT NULL,
    started REAL NOT NULL
);
"""


@dataclass(frozen=True)
class Session:
    rater: str
    csrf: str
    credential: str  # the rater's credential when the session started
    started: float


def sessions_path(store: str | os.PathLike[str]) -> Path:
    return Path(f"{os.fspath(store)}.sessions")


def _private_file(path: Path) -> None:
    """``path``, created empty where there is none, readable and writable by its owner alone."""
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    os.chmod(path, 0o600)


def _id_hash(session_id: str) -> str:
    return hashlib.sha256(session_id.encode("utf-8")).hexdigest()


class Sessions:
    """The sessions of the store at ``store``; safe to use from several threads."""

    def __init__(self, store: str | os.PathLike[str]) -> None:
        self.path = sessions_path(store)
        _private_file(self.path)
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30)
        self._db.executescript(SCHEMA)
        self._lock = threading.Lock()

    def close(self) -> None:
        self._db.close()

    def start(self, rater: str, credential: str) -> str:
        """A new session of ``rater``: its id, for the cookie. Sessions past their time are forgotten."""
        session_id = secrets.token_urlsafe(32)
        with self._lock:
            self._db.execute("DELETE FROM sessions WHERE started < ?", (time.time() - SESSION_HOURS * 3600,))
            self._db.execute(
                "INSERT INTO sessions (id_sha256, rater, csrf, credential, started) VALUES (?, ?, ?, ?, ?)",
                (_id_hash(session_id), rater, secrets.token_urlsafe(32), credential, time.time()),
            )
        return session_id

    def get(self, session_id: str | None) -> Session | None:
        """The session with this id, unless it has ended or run past its time."""
        if not session_id:
            return None
        with self._lock:
            row = self._db.execute(
                "SELECT rater, csrf, credential, started FROM sessions WHERE id_sha256 = ?", (_id_hash(session_id),)
            ).fetchone()
        if row is None or time.time() - row[3] > SESSION_HOURS * 3600:
            return None
        return Session(*row)

    def end(self, session_id: str | None) -> None:
        with self._lock:
            self._db.execute("DELETE FROM sessions WHERE id_sha256 = ?", (_id_hash(session_id or ""),))
