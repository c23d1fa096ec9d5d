"""The review desk's store: one SQLite file with the items as shown, the raters, who rates what, and a log of
every rating that is only ever appended to.

An item is one version of what a rater sees (``shown``) and its sha256; loading changed content adds a new
version and retires the old one, whose ratings stay in the log but no longer count. A rating names the item's
hash as the rater saw it, who rated and when; the database itself refuses a rating of an item that is not
current, not assigned to the rater, or rated by them before, and refuses to change, delete or replace a logged
rating, whatever the statement (UPDATE, DELETE, INSERT OR REPLACE, REPLACE, an upsert). A store made before a
rule was added gets it when it is opened.

Each rating row also carries its link in a hash chain and each item row the hash of its content (``chain``),
computed in the rating's (or the load's) own transaction, so that anyone can check afterwards that no row was
changed behind the triggers' back (``verify``, ``h2htalk desk-verify``); a store made before the chain gets it,
computed over its rows as they are then, when it is opened.

Every rating is its own transaction, committed with ``synchronous=FULL`` before the desk answers: a rating the
rater saw acknowledged survives the server being killed. The rollback journal (not WAL) keeps every committed
rating in the file itself, so the file's sha256 names exactly the ratings read from it.
"""

from __future__ import annotations

import glob
import hashlib
import json
import logging
import os
import secrets
import socket
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import closing, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from h2htalk.desk_store.assign import assign, rater_order
from h2htalk.desk_store.chain import Verified, canonical, content_hash, item_row_hash, items_digest, link, verify
from h2htalk.desk_store.tasks import TASK_OF_SHEET, Refused, complete_values
from h2htalk.errors import ConfigError, H2HTalkError
from h2htalk.io import sha256_file
from h2htalk.sheets import Rating, Sheet
from h2htalk.store import connect_read_only, page_problems

logger = logging.getLogger(__name__)

LOCK_TIMEOUT_S = 30  # how long a write waits for another one to finish

SCHEMA = """
CREATE TABLE IF NOT EXISTS raters (
    name TEXT PRIMARY KEY,
    token_sha256 TEXT,
    added_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS items (
    id INTEGER PRIMARY KEY,
    task TEXT NOT NULL,
    key TEXT NOT NULL,
    hash TEXT NOT NULL,
    shown TEXT NOT NULL,
    after TEXT NOT NULL,
    current INTEGER NOT NULL,
    loaded_at TEXT NOT NULL,
    row_sha256 TEXT,
    UNIQUE (task, key, hash)
);
CREATE UNIQUE INDEX IF NOT EXISTS one_current_version ON items (task, key) WHERE current = 1;
CREATE TABLE IF NOT EXISTS assignments (
    item INTEGER NOT NULL REFERENCES items (id),
    rater TEXT NOT NULL REFERENCES raters (name),
    PRIMARY KEY (item, rater)
);
CREATE TABLE IF NOT EXISTS log (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    item INTEGER NOT NULL REFERENCES items (id),
    item_hash TEXT NOT NULL,
    rater TEXT NOT NULL REFERENCES raters (name),
    value TEXT NOT NULL,
    at TEXT NOT NULL,
    via TEXT NOT NULL,
    chain TEXT,
    UNIQUE (item, rater)
);
"""

TABLES = ("raters", "items", "assignments", "log")  # every table of SCHEMA: a store has them all


def _create_whole(path: Path) -> None:
    """An empty store at ``path``, made under a temporary name and linked into place: a store is there whole or not
    at all (a stop halfway leaves none), and of two processes that make it at once, the second opens the first's."""
    path.parent.mkdir(parents=True, exist_ok=True)
    made = path.with_name(f".{path.name}.{socket.gethostname()}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        with closing(sqlite3.connect(made)) as db:
            db.executescript(SCHEMA)
        try:
            os.link(made, path)
        except FileExistsError:
            pass  # another process placed its store first: that one is opened
        except OSError:  # a file system without hard links (FAT, some mounts): moved into place, unless one is there
            if not path.exists():
                os.replace(made, path)
    finally:
        made.unlink(missing_ok=True)


def _remove_stores_left_half_made(path: Path) -> None:
    """The temporary stores beside ``path`` that processes of this machine left when they were killed making one
    (its name says whose it is; another machine's sharing the folder, a live process's, and one this user may not
    remove are kept)."""
    prefix, host = f".{path.name}.", socket.gethostname()
    for left in path.parent.glob(f"{glob.escape(prefix)}*.tmp*"):  # with its journal, where SQLite left one
        parts = left.name.removeprefix(prefix).removesuffix("-journal").rsplit(".", 3)  # host, pid, token, "tmp"
        if len(parts) == 4 and parts[3] == "tmp" and parts[0] == host and _dead(parts[1]):
            with suppress(OSError):
                left.unlink()


def _dead(pid: str) -> bool:
    """Whether the process ``pid`` (as a file name gives it) is known to be gone."""
    if not (pid.isascii() and pid.isdecimal()):
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except (OSError, OverflowError):  # another user's (EPERM), or a number no pid is
        pass
    return False


# the log's rules, by name: a store that lacks one (made before it was written) gets it when it is opened
TRIGGERS = {
    "log_rates_current_assigned_items": """BEFORE INSERT ON log
        WHEN NOT EXISTS (SELECT 1 FROM items WHERE id = NEW.item AND hash = NEW.item_hash AND current = 1)
          OR NOT EXISTS (SELECT 1 FROM assignments WHERE item = NEW.item AND rater = NEW.rater)
        BEGIN SELECT RAISE(ABORT, 'not a current item assigned to this rater'); END""",
    # before any conflict clause acts: INSERT OR REPLACE, REPLACE and an upsert would otherwise delete or
    # rewrite the row there (a REPLACE's delete fires no DELETE trigger)
    "log_is_append_only_insert": """BEFORE INSERT ON log
        WHEN EXISTS (SELECT 1 FROM log WHERE id = NEW.id OR (item = NEW.item AND rater = NEW.rater))
        BEGIN SELECT RAISE(ABORT, 'the rating log is append-only: the row or the rating is there'); END""",
    "log_is_append_only_update": """BEFORE UPDATE ON log
        BEGIN SELECT RAISE(ABORT, 'the rating log is append-only'); END""",
    "log_is_append_only_delete": """BEFORE DELETE ON log
        BEGIN SELECT RAISE(ABORT, 'the rating log is append-only'); END""",
    "log_is_chained": """BEFORE INSERT ON log WHEN NEW.chain IS NULL
        BEGIN SELECT RAISE(ABORT, 'a rating needs its link in the chain (ReviewStore.rate)'); END""",
    # an item's version is fixed once loaded; only which version is current changes (with its row's hash)
    "items_are_fixed": """BEFORE UPDATE OF id, task, key, hash, shown, after, loaded_at ON items
        BEGIN SELECT RAISE(ABORT, 'an item is fixed once loaded: changed content is loaded as a new version'); END""",
    "items_are_kept": """BEFORE DELETE ON items
        BEGIN SELECT RAISE(ABORT, 'an item is kept once loaded: ratings name it'); END""",
}


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class DeskItem:
    """One thing to rate: its task, its key in the task's sheet (model, variant, ... : never shown), what the
    desk shows, and what it shows once the rater has rated (the judge's or the voters' verdict)."""

    task: str
    key: tuple[str, ...]
    shown: dict[str, Any]
    after: dict[str, Any] = field(default_factory=dict)

    @property
    def hash(self) -> str:
        return content_hash(self.task, self.shown)


@dataclass(frozen=True)
class StoredItem:
    id: int
    task: str
    key: tuple[str, ...]
    hash: str
    shown: dict[str, Any]
    after: dict[str, Any]
    current: bool


@dataclass(frozen=True)
class LoadReport:
    new: int
    changed: int
    unchanged: int
    assignments: int


def _item(row: sqlite3.Row) -> StoredItem:
    return StoredItem(
        row["id"], row["task"], tuple(json.loads(row["key"])), row["hash"], json.loads(row["shown"]),
        json.loads(row["after"]), bool(row["current"]),
    )  # fmt: skip


class ReviewStore:
    """The store at ``path``; ``create`` makes an empty one where there is none; ``read_only`` reads it as it is,
    without giving it what a store made by an older version lacks (a dry run changes nothing); ``check_pages``:
    read every page once, so that a damaged store is named before anything reads it (the desk checks it when it
    starts, not at every request, to each of which it added 10-20 ms)."""

    def __init__(
        self, path: str | os.PathLike[str], *, create: bool = False, read_only: bool = False, check_pages: bool = True
    ) -> None:
        self.path = Path(path)
        if create:
            _remove_stores_left_half_made(self.path)
        if not self.path.exists():
            if not create:
                raise H2HTalkError(f"no review store at {self.path}: load the desk's items first (h2htalk desk-load)")
            _create_whole(self.path)
        try:
            connect = connect_read_only if read_only else sqlite3.connect
            self.db = connect(self.path, timeout=LOCK_TIMEOUT_S, isolation_level=None, check_same_thread=False)
            self.db.row_factory = sqlite3.Row
            if not read_only:
                self.db.execute("PRAGMA journal_mode=DELETE")
            if create:  # what a store made before a table was added lacks
                self.db.executescript(SCHEMA)
            missing = [table for table in TABLES if not self._columns(table)]
            problems = page_problems(self.db) if check_pages else []
        except sqlite3.DatabaseError as exc:
            if hasattr(self, "db"):
                self.db.close()
            error = getattr(exc, "sqlite_errorname", "")
            if error == "SQLITE_NOTADB":
                raise H2HTalkError(f"{self.path} is no review store ({exc}): review.store names another file") from None
            if not error.startswith("SQLITE_CORRUPT"):  # locked past the timeout, unreadable, a folder, ...
                raise H2HTalkError(f"{self.path}: the review store could not be read ({exc})") from None
            problems = [str(exc)]
        if problems:
            self.db.close()
            raise H2HTalkError(
                f"{self.path}: the review store is damaged ({'; '.join(problems)}). It holds people's ratings, which"
                " no run makes again: put back a copy of it (made while the desk was stopped)"
            )
        if missing:
            self.db.close()
            raise H2HTalkError(
                f"{self.path} is no review store: it has no table {', '.join(missing)} (review.store names another"
                " SQLite file, or a store that a stopped program left half made, which h2htalk desk-load completes)"
            )
        if read_only:
            return
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute("PRAGMA foreign_keys=ON")
        self._add_chain()
        self._add_missing_triggers()

    def _add_chain(self) -> None:
        """Give a store made before the log was chained its hashes, computed over its rows as they are now, in
        one transaction (the log's rule against UPDATE is lifted inside it for this only)."""
        if "chain" in self._columns("log"):
            return
        with self._writing() as db:
            if "chain" in self._columns("log"):  # another process did it meanwhile
                return
            db.execute("ALTER TABLE items ADD COLUMN row_sha256 TEXT")
            db.execute("ALTER TABLE log ADD COLUMN chain TEXT")
            self._rehash_items([row[0] for row in db.execute("SELECT id FROM items")])
            db.execute("DROP TRIGGER IF EXISTS log_is_append_only_update")
            previous = ""
            for row in db.execute("SELECT * FROM log ORDER BY id").fetchall():
                item = db.execute("SELECT task, key FROM items WHERE id = ?", (row["item"],)).fetchone()
                previous = link(previous, row, item["task"], item["key"])
                db.execute("UPDATE log SET chain = ? WHERE id = ?", (previous, row["id"]))
            db.execute(f"CREATE TRIGGER log_is_append_only_update {TRIGGERS['log_is_append_only_update']}")
            count = db.execute("SELECT COUNT(*) FROM log").fetchone()[0]
        logger.warning(
            "%s was made before the rating log was chained: its chain is computed now, over its %d ratings as they "
            "are (h2htalk desk-verify checks it from now on)", self.path, count,
        )  # fmt: skip

    def _columns(self, table: str) -> set[str]:
        return {row["name"] for row in self.db.execute(f"PRAGMA table_info({table})")}

    def _rehash_items(self, ids: Iterable[int]) -> None:
        """Store the hash of each of these item rows as it is now (inside a write transaction)."""
        for item_id in ids:
            row = self.db.execute("SELECT * FROM items WHERE id = ?", (item_id,)).fetchone()
            self.db.execute("UPDATE items SET row_sha256 = ? WHERE id = ?", (item_row_hash(row), item_id))

    def verify(self, head: str | None = None) -> Verified:
        """The log's chain and the items' hashes recomputed (``chain.verify``)."""
        return verify(self.db, head)

    def _add_missing_triggers(self) -> None:
        present = {row[0] for row in self.db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
        missing = [name for name in TRIGGERS if name not in present]
        if missing:
            with self._writing() as db:
                for name in missing:
                    db.execute(f"CREATE TRIGGER IF NOT EXISTS {name} {TRIGGERS[name]}")

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> ReviewStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _writing(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken up front and committed (to disk) before it returns."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    # --- raters ------------------------------------------------------------------------------------------

    def add_raters(self, names: Iterable[str]) -> None:
        with self._writing() as db:
            db.executemany(
                "INSERT OR IGNORE INTO raters (name, added_at) VALUES (?, ?)", [(name, now()) for name in names]
            )

    def raters(self) -> list[str]:
        return [row[0] for row in self.db.execute("SELECT name FROM raters ORDER BY name")]

    def new_token(self, rater: str) -> str:
        """A fresh token for ``rater`` (the one before it stops working); only its hash is kept."""
        token = secrets.token_urlsafe(24)
        with self._writing() as db:
            if not db.execute("UPDATE raters SET token_sha256 = ? WHERE name = ?", (token_hash(token), rater)).rowcount:
                raise H2HTalkError(f"{rater!r} is not a rater of this store (review.raters, then h2htalk desk-load)")
        return token

    def credential(self, rater: str) -> str | None:
        """What a rater's sessions are bound to: their token's hash ("" while they have none; a new token ends
        the sessions started before it), or None for no such rater."""
        row = self.db.execute("SELECT token_sha256 FROM raters WHERE name = ?", (rater,)).fetchone()
        return None if row is None else row[0] or ""

    def has_token(self, rater: str) -> bool:
        return bool(self.credential(rater))

    def token_matches(self, rater: str, token: str) -> bool:
        credential = self.credential(rater)
        return bool(credential) and secrets.compare_digest(credential, token_hash(token))

    # --- items and assignments ---------------------------------------------------------------------------

    def load(self, items: Sequence[DeskItem], raters: Sequence[str], per_item: int, seed: int) -> LoadReport:
        """Add the items that are new or whose content changed (retiring the old version) and hand each out to
        ``per_item`` raters; unchanged items keep their raters and ratings. One transaction."""
        self.add_raters(raters)
        new = changed = 0
        added: list[tuple[int, str]] = []
        # in a seeded order, so that an item's number says nothing of its model, variant or task
        shuffled = sorted(items, key=lambda i: rater_order(seed, "", i.task, canonical(list(i.key))))
        with self._writing() as db:
            for item in shuffled:
                key = canonical(list(item.key))
                query = "SELECT id, hash FROM items WHERE task = ? AND key = ? AND current = 1"
                old = db.execute(query, (item.task, key)).fetchone()
                if old is not None and old["hash"] == item.hash:
                    continue
                if old is not None:
                    db.execute("UPDATE items SET current = 0 WHERE id = ?", (old["id"],))
                    self._rehash_items([old["id"]])
                    changed += 1
                else:
                    new += 1
                cursor = db.execute(
                    "INSERT INTO items (task, key, hash, shown, after, current, loaded_at) VALUES (?, ?, ?, ?, ?, 1, ?)"
                    " ON CONFLICT (task, key, hash) DO UPDATE SET current = 1 RETURNING id",
                    (item.task, key, item.hash, canonical(item.shown), canonical(item.after), now()),
                )
                added.append((cursor.fetchone()[0], item.task))
                self._rehash_items([added[-1][0]])
            unassigned = [(i, t) for i, t in added if not self._assigned(i)]
            loads = db.execute(
                "SELECT a.rater, i.task FROM assignments a JOIN items i ON i.id = a.item WHERE i.current = 1"
            ).fetchall()
            pairs = assign(unassigned, sorted(raters), per_item, seed, [tuple(r) for r in loads])
            db.executemany("INSERT INTO assignments (item, rater) VALUES (?, ?)", pairs)
        return LoadReport(new, changed, len(items) - new - changed, len(pairs))

    def _assigned(self, item: int) -> bool:
        return self.db.execute("SELECT 1 FROM assignments WHERE item = ?", (item,)).fetchone() is not None

    def item(self, item_id: int) -> StoredItem | None:
        if not 0 < item_id < 2**63:  # beyond SQLite's integers: no such item
            return None
        row = self.db.execute("SELECT * FROM items WHERE id = ?", (item_id,)).fetchone()
        return _item(row) if row else None

    def is_assigned(self, item_id: int, rater: str) -> bool:
        query = "SELECT 1 FROM assignments WHERE item = ? AND rater = ?"
        return self.db.execute(query, (item_id, rater)).fetchone() is not None

    def queue(self, rater: str, task: str, seed: int) -> list[tuple[int, bool]]:
        """(item, rated) of the current items of ``task`` assigned to ``rater``, in the rater's own order."""
        rows = self.db.execute(
            "SELECT i.id, i.key, EXISTS (SELECT 1 FROM log l WHERE l.item = i.id AND l.rater = a.rater) AS rated"
            " FROM assignments a JOIN items i ON i.id = a.item WHERE a.rater = ? AND i.task = ? AND i.current = 1",
            (rater, task),
        ).fetchall()
        rows.sort(key=lambda r: rater_order(seed, rater, task, r["key"]))
        return [(r["id"], bool(r["rated"])) for r in rows]

    def progress(self) -> dict[str, dict[str, dict[str, int]]]:
        """task -> rater -> {assigned, rated}, over current items."""
        rows = self.db.execute(
            "SELECT i.task, a.rater, COUNT(*) AS assigned, COUNT(l.id) AS rated FROM assignments a"
            " JOIN items i ON i.id = a.item LEFT JOIN log l ON l.item = a.item AND l.rater = a.rater"
            " WHERE i.current = 1 GROUP BY i.task, a.rater"
        )
        out: dict[str, dict[str, dict[str, int]]] = {}
        for row in rows:
            out.setdefault(row["task"], {})[row["rater"]] = {"assigned": row["assigned"], "rated": row["rated"]}
        return out

    # --- ratings -----------------------------------------------------------------------------------------

    def rating(self, item_id: int, rater: str) -> dict[str, Any] | None:
        row = self.db.execute("SELECT value FROM log WHERE item = ? AND rater = ?", (item_id, rater)).fetchone()
        return json.loads(row[0]) if row else None

    def rate(self, item_id: int, rater: str, item_hash: str, values: dict[str, Any], via: str) -> int:
        """Append one rating and commit it: its log row (or Refused, as ``rate_many``)."""
        return self.rate_many([(item_id, rater, item_hash, values)], via)[0]

    def rate_many(self, ratings: Sequence[tuple[int, str, str, dict[str, Any]]], via: str) -> list[int]:
        """Append (item, rater, item hash as shown, values) ratings, all or none, in one commit: their log rows,
        or Refused for the first that cannot be stored (its ``index``): 404 for no such item, 403 for an item not
        assigned to the rater, 409 for an item rated by them before or no longer as they saw it, 422 for values
        the task's rules refuse (``complete_values``: only what the desk's form gives)."""
        rows = []
        with self._writing():
            for index, (item_id, rater, item_hash, values) in enumerate(ratings):
                try:
                    checked = self._checked(item_id, rater, item_hash, values)
                except Refused as exc:
                    raise Refused(str(exc), exc.status, index) from None
                rows.append(self._append(item_id, rater, item_hash, checked, via))
        return rows

    def _append(self, item_id: int, rater: str, item_hash: str, values: dict[str, Any], via: str) -> int:
        """Insert one rating with its link in the chain, computed from the last row's (inside the write
        transaction, which no other writer can enter until it commits): its row."""
        row_id = self.db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM sqlite_sequence WHERE name = 'log'")
        row = {
            "id": row_id.fetchone()[0], "item": item_id, "item_hash": item_hash, "rater": rater,
            "value": canonical(values), "at": now(), "via": via,
        }  # fmt: skip
        last = self.db.execute("SELECT chain FROM log ORDER BY id DESC LIMIT 1").fetchone()
        item = self.db.execute("SELECT task, key FROM items WHERE id = ?", (item_id,)).fetchone()
        self.db.execute(
            "INSERT INTO log (id, item, item_hash, rater, value, at, via, chain)"
            " VALUES (:id, :item, :item_hash, :rater, :value, :at, :via, :chain)",
            {**row, "chain": link(last[0] if last else "", row, item["task"], item["key"])},
        )
        return int(row["id"])

    def _checked(self, item_id: int, rater: str, item_hash: str, values: dict[str, Any]) -> dict[str, Any]:
        """The values as the log keeps them, if the rating may be stored (values read from a text the form
        offers, by the task's rules), or Refused."""
        item = self.item(item_id)
        if item is None:
            raise Refused(f"there is no item {item_id}", 404)
        if not self.is_assigned(item_id, rater):
            raise Refused(f"item {item_id} is not assigned to {rater}", 403)
        if self.rating(item_id, rater) is not None:
            raise Refused(f"{rater} has already rated item {item_id}", 409)
        if not item.current or item.hash != item_hash:
            raise Refused(f"item {item_id} has changed since it was shown: open it again", 409)
        return complete_values(item.task, values, item.shown)


def store_ratings(path: str | os.PathLike[str], sheet: Sheet) -> list[Rating]:
    """The ratings of ``sheet`` in the store at ``path`` (of current items), each with the store's path, its log
    row, the store's sha256 and the log's head, read in one snapshot: the checksum names exactly these ratings,
    and the head the log they were read from, to the row."""
    with ReviewStore(path) as store:
        store.db.execute("BEGIN")  # a read transaction: writers wait until the file is hashed
        rows = _current_ratings(store.db, sheet)
        head = log_head(store.db)
        digest = sha256_file(path)
        store.db.execute("COMMIT")
    return [
        Rating(
            tuple(json.loads(r["key"])), json.loads(r["value"]), r["rater"], str(path), r["id"], digest, "log_row", head
        )
        for r in rows
    ]


def _current_ratings(db: sqlite3.Connection, sheet: Sheet) -> list[sqlite3.Row]:
    """The log's rows of ``sheet``'s current items, in the log's order."""
    return db.execute(
        "SELECT l.id, i.key, l.rater, l.value FROM log l JOIN items i ON i.id = l.item"
        " WHERE i.task = ? AND i.current = 1 ORDER BY l.id",
        (TASK_OF_SHEET[sheet.kind],),
    ).fetchall()


def log_state(path: str | os.PathLike[str]) -> dict[str, str]:
    """The store's log head and its items' digest, as stored (``desk-verify`` recomputes them)."""
    with ReviewStore(path) as store:
        store.db.execute("BEGIN")
        hashes = [row[0] or "" for row in store.db.execute("SELECT row_sha256 FROM items ORDER BY id")]
        head = log_head(store.db)
        store.db.execute("COMMIT")
    return {"log_head": head, "items_sha256": items_digest(hashes)}


def log_head(db: sqlite3.Connection) -> str:
    """The last rating row's link in the chain, as stored ("" for an empty log): it names the whole log."""
    row = db.execute("SELECT chain FROM log ORDER BY id DESC LIMIT 1").fetchone()
    return row[0] if row else ""


def check_store(path: str | os.PathLike[str]) -> None:
    """Fail, naming the key, where ``review.store`` names a file that is no review store: the jobs that read ratings
    would each fail on it (no store at all is one with no ratings)."""
    if os.path.exists(path):
        try:
            ReviewStore(path, read_only=True).close()
        except H2HTalkError as exc:
            raise ConfigError(f"invalid configuration:\n  - key 'review.store': {exc}") from None


def ratings_digest(path: str | os.PathLike[str], sheet: Sheet, model: str | None = None) -> str:
    """A digest of what ``sheet``'s ratings in the store say (of ``model``'s items only, when given): it changes
    when, and only when, a job that reads them would compute something else."""
    rows = []  # no store: no ratings, as an empty one
    if os.path.exists(path):
        with ReviewStore(path, read_only=True, check_pages=False) as store:  # its pages: checked as the run loads
            rows = _current_ratings(store.db, sheet)
    keyed = ((json.loads(r["key"]), r) for r in rows)
    said = sorted(
        canonical([key, r["rater"], json.loads(r["value"])]) for key, r in keyed if model is None or key[:1] == [model]
    )
    return hashlib.sha256("\n".join(said).encode("utf-8")).hexdigest()
