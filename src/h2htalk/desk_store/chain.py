"""The review store's log, verifiable by anyone: each rating row carries a hash over its content and the previous
row's hash (its link in a chain), each item row a hash of its content, and ``verify`` recomputes them all.

A rating's link is the SHA-256 of the previous row's link (the empty text before the first row), a line feed and
the JSON array (UTF-8, keys sorted, no spaces) of the row as stored: ``[id, item, item_hash, task, key, rater,
value, at, via]``, where ``task`` and ``key`` are the rated item's (so a rating moved to another item, model or
variant breaks its link) and ``key`` and ``value`` are the stored JSON texts. The last row's link is the log's
head: it names every rating and their order, and a table records the head it was made from. An item row's hash
is the SHA-256 of the JSON array ``[id, task, key, hash, shown, after, current, loaded_at]`` (``current`` too, so
hiding a version's ratings shows); the items' digest is the SHA-256 of their row hashes, one a line, in id order.

The hashes carry no key: whoever can write the file can recompute them all. What they give is that a change no
longer goes unseen: rewritten and recomputed, the log has another head than the one a published table names
(``desk-verify --head``); rewritten without recomputing, ``desk-verify`` names the first row that does not match.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

ITEM_COLUMNS = ("id", "task", "key", "hash", "shown", "after", "current", "loaded_at")


def canonical(value: Any) -> str:
    """JSON as the store writes it and hashes it: keys sorted, no spaces, UTF-8."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def content_hash(task: str, shown: Any) -> str:
    """The hash of what an item shows (``DeskItem.hash``, an item row's ``hash``)."""
    return _sha256(canonical({"task": task, "shown": shown}))


def item_row_hash(row: sqlite3.Row) -> str:
    """The hash of an item row's content."""
    return _sha256(canonical([row[column] for column in ITEM_COLUMNS]))


def link(previous: str, row: sqlite3.Row | dict[str, Any], task: str, key: str) -> str:
    """A rating row's link: over the previous row's link and the row's content with its item's task and key."""
    content = [row["id"], row["item"], row["item_hash"], task, key, row["rater"], row["value"], row["at"], row["via"]]
    return _sha256(f"{previous}\n{canonical(content)}")


def items_digest(row_hashes: Iterable[str]) -> str:
    return _sha256("\n".join(row_hashes))


@dataclass(frozen=True)
class Verified:
    """What ``verify`` found: the counts, the head and the items' digest as recomputed, the first item row and
    the first rating row that do not match (one line each; none when all match), and the row whose link is
    the head asked about (0: none; None: not asked)."""

    ratings: int
    items: int
    head: str
    items_digest: str
    problems: tuple[str, ...]
    head_row: int | None = None


def _item_problem(items: list[sqlite3.Row], hashes: list[str]) -> list[str]:
    """The first item row that does not match its hashes."""
    for row, recomputed in zip(items, hashes, strict=True):
        if row["row_sha256"] != recomputed:
            return [f"items row {row['id']} does not match its hash: the row was changed after it was loaded"]
        if row["hash"] != content_hash(row["task"], json.loads(row["shown"])):
            return [f"items row {row['id']}: what it shows does not match its content hash"]
    return []


def _chain(ratings: list[sqlite3.Row], sequence: int) -> tuple[dict[str, int], list[str]]:
    """The links recomputed (link -> row) up to the first rating row that does not match, and that row."""
    links: dict[str, int] = {}
    previous = ""
    for row in ratings:
        if row["item_task"] is None:
            return links, [f"log row {row['id']}: its item {row['item']} is not in the items table"]
        previous = link(previous, row, row["item_task"], row["item_key"])
        if row["chain"] != previous:
            return links, [f"log row {row['id']} does not match its link: the row was changed, or one before it gone"]
        if row["item_hash"] != row["item_now"]:
            return links, [f"log row {row['id']}: item {row['item']}'s content hash is not the one that was rated"]
        links[previous] = row["id"]
    last = ratings[-1]["id"] if ratings else 0
    if sequence > last:  # AUTOINCREMENT remembers the highest row ever stored
        return links, [f"log rows {last + 1} to {sequence} were stored and are gone"]
    return links, []


def verify(db: sqlite3.Connection, head: str | None = None) -> Verified:
    """Recompute every item row's hash and the rating log's chain, in one read snapshot."""
    db.execute("BEGIN")
    try:
        items = db.execute("SELECT * FROM items ORDER BY id").fetchall()
        ratings = db.execute(
            "SELECT l.*, i.task AS item_task, i.key AS item_key, i.hash AS item_now FROM log l"
            " LEFT JOIN items i ON i.id = l.item ORDER BY l.id"
        ).fetchall()
        sequence = db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'log'").fetchone()
    finally:
        db.execute("COMMIT")
    hashes = [item_row_hash(row) for row in items]
    links, broken = _chain(ratings, sequence[0] if sequence else 0)
    whole = not broken and len(links) == len(ratings)
    return Verified(
        len(ratings), len(items), next(reversed(links), "") if whole else "", items_digest(hashes),
        tuple(_item_problem(items, hashes) + broken), None if head is None else links.get(head, 0),
    )  # fmt: skip
