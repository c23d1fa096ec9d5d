"""The one strict importer of what people fill in (the sheets of ``h2htalk.sheets``).

People rate at the review desk (``h2htalk.review``), whose store keeps every rating in an append-only log, or in
CSV files. Every file is read whole and checked before anything is used: a missing column, an unknown item, a value
that cannot be read, or one rater rating one item twice is an error naming the file, the row and the problem, and
nothing of any file is imported then. A store's ratings pass the same checks beside the files.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Callable, Iterable

from h2htalk.errors import DataError
from h2htalk.io import sha256_file
from h2htalk.sheets import (
    INSTANCE_DECISIONS,
    NEED_VERDICTS,
    REVIEW_SCORES,
    SAFETY_RATINGS,
    Rating,
    Sheet,
    normalise,
    yes_no,
)

# the sheets and their readers are defined below this module (``h2htalk.sheets``); their users import them here
__all__ = [
    "INSTANCE_DECISIONS", "NEED_VERDICTS", "REVIEW_SCORES", "SAFETY_RATINGS", "Rating", "Sheet", "checksums",
    "import_error", "known_items", "read_ratings", "yes_no",
]  # fmt: skip

MAX_PROBLEMS = 20  # listed in one error; the rest are counted

ItemCheck = Callable[[tuple[str, ...]], str | None]  # why an item is not one the caller knows, or None


def read_ratings(
    paths: Iterable[str | os.PathLike[str]],
    sheet: Sheet,
    check_item: ItemCheck,
    store: str | os.PathLike[str] | None = None,
) -> list[Rating]:
    """Every rated row of every file, and every rating of the sheet in the review desk's ``store`` (when given and
    there), or an error listing each problem with its file and row."""
    from h2htalk.review.store import store_ratings

    ratings: list[Rating] = []
    problems: list[str] = []
    for path in paths:
        ratings += _read_file(str(path), sheet, check_item, problems)
    if store is not None and os.path.exists(store):
        for rating in store_ratings(store, sheet):
            if (problem := check_item(rating.item)) is not None:
                problems.append(f"{rating.where()}: {problem}")
            else:
                ratings.append(rating)
    seen: dict[tuple[tuple[str, ...], str], Rating] = {}
    for rating in ratings:
        earlier = seen.setdefault((rating.item, rating.rater), rating)
        if earlier is not rating:
            who = f"rater {rating.rater!r}" if rating.rater else "one unnamed rater"
            problems.append(f"{rating.where()}: {who} rated {'/'.join(rating.item)} again (first in {earlier.where()})")
    if problems:
        raise import_error(sheet.kind, problems)
    return ratings


def import_error(kind: str, problems: list[str]) -> DataError:
    """The error of an import that found ``problems``: each one (up to MAX_PROBLEMS), and nothing imported."""
    shown = "\n".join(f"  - {p}" for p in problems[:MAX_PROBLEMS])
    more = f"\n  ... and {len(problems) - MAX_PROBLEMS} more" if len(problems) > MAX_PROBLEMS else ""
    return DataError(f"cannot import the {kind}; nothing was imported:\n{shown}{more}")


def _read_file(path: str, sheet: Sheet, check_item: ItemCheck, problems: list[str]) -> list[Rating]:
    try:
        with open(path, encoding="utf-8-sig", newline="") as handle:
            reader = csv.DictReader(handle)
            header = [normalise(name) for name in reader.fieldnames or []]
            rows = list(reader)
    except FileNotFoundError:
        problems.append(f"{path}: file not found")
        return []
    needed = [*sheet.item, *(f.column for f in sheet.values if f.required), sheet.rater]
    missing = [column for column in needed if column not in header]
    if missing:
        problems.append(f"{path}: line 1: missing column {', '.join(missing)} (the {sheet.kind} need it)")
        return []
    digest = sha256_file(path)
    ratings = []
    for number, raw in enumerate(rows, start=2):
        row = {normalise(k): (v or "") for k, v in raw.items() if k is not None}
        filled = {f.column: row.get(f.column, "") for f in sheet.values if normalise(row.get(f.column, ""))}
        if not filled:
            continue
        item = tuple(normalise(row[column]) for column in sheet.item)
        if (problem := check_item(item)) is not None:
            problems.append(f"{path}: line {number}: {problem}")
            continue
        values = {}
        for field in sheet.values:
            if field.column in filled:
                try:
                    values[field.column] = field.read(filled[field.column])
                except ValueError as exc:
                    problems.append(f"{path}: line {number}: {field.column} {exc}")
        if len(values) == len(filled):
            ratings.append(Rating(item, values, normalise(row[sheet.rater]), path, number, digest))
    return ratings


def known_items(items: Iterable[tuple[str, ...]], what: str) -> ItemCheck:
    """A check that accepts exactly ``items``."""
    known = set(items)
    return lambda item: None if item in known else f"{what} {'/'.join(item)} is not one of this run's"


def checksums(paths: Iterable[str | os.PathLike[str]]) -> list[dict[str, str]]:
    """Where people's files came from, for provenance."""
    return [{"file": str(path), "sha256": sha256_file(path)} for path in paths]
