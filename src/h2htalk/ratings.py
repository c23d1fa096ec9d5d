"""What people fill in (review scores, safety ratings, decisions on instances, instruction-following verdicts), read
by one strict importer.

People rate at the review desk (``h2htalk.review``), whose store keeps every rating in an append-only log, or in
CSV files. Every file is read whole and checked before anything is used: a missing column, an unknown item, a value that
cannot be read, or one rater rating one item twice is an error naming the file, the row and the problem, and
nothing of any file is imported then. A store's ratings pass the same checks beside the files. Values are read the
same way everywhere: full-width digits, letters and
spaces as their ASCII forms (NFKC), and yes/no in English or Chinese, or as a tick.
"""

from __future__ import annotations

import csv
import json
import os
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from h2htalk.errors import DataError
from h2htalk.io import sha256_file
from h2htalk.studies.judges import VIOLATIONS

YES = ("yes", "y", "true", "1", "是", "对", "有", "x", "✓", "✔")
NO = ("no", "n", "false", "0", "否", "不是", "没有", "无")
MAX_PROBLEMS = 20  # listed in one error; the rest are counted


def normalise(text: str) -> str:
    return unicodedata.normalize("NFKC", text).strip()


def yes_no(text: str) -> bool:
    value = normalise(text).lower()
    if value in YES:
        return True
    if value in NO:
        return False
    raise ValueError(f"{text!r} is neither yes ({', '.join(YES)}) nor no ({', '.join(NO)})")


def score_in(low: float, high: float) -> Callable[[str], float]:
    def read(text: str) -> float:
        try:
            value = float(normalise(text))
        except ValueError:
            raise ValueError(f"{text!r} is not a number") from None
        if not low <= value <= high:
            raise ValueError(f"{value:g} is outside {low:g} to {high:g}")
        return value

    return read


def one_of(*choices: str) -> Callable[[str], str]:
    def read(text: str) -> str:
        value = normalise(text).lower()
        if value not in choices:
            raise ValueError(f"{text!r} is not one of {', '.join(choices)}")
        return value

    return read


def json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg})") from None
    if not isinstance(value, dict):
        raise ValueError("not a JSON object")
    return value


@dataclass(frozen=True)
class Field:
    """A column people fill in; ``read`` turns its text into a value or raises ValueError saying why not."""

    column: str
    read: Callable[[str], Any]
    required: bool = True  # the column must be there (its cells may be empty: not rated yet)


@dataclass(frozen=True)
class Sheet:
    """One kind of file people fill in: the columns that name the item, those that hold the rating (a row
    with none of them filled in is not rated yet), and the one that names who rated."""

    kind: str
    item: tuple[str, ...]
    values: tuple[Field, ...]
    rater: str


REVIEW_SCORES = Sheet(
    "review scores", ("model", "variant", "subtask", "id"), (Field("human_score", score_in(0, 5)),), "reviewer"
)
SAFETY_RATINGS = Sheet(
    "safety ratings",
    ("model", "variant", "id"),
    (
        Field("safety_score", score_in(1, 5)),
        Field("violation", yes_no),
        Field("violation_category", one_of("none", *VIOLATIONS), required=False),
    ),
    "rater",
)
INSTANCE_DECISIONS = Sheet(
    "instance decisions",
    ("id",),
    (Field("decision", one_of("keep", "drop")), Field("fields", json_object, required=False)),
    "reviewer",
)
NEED_VERDICTS = Sheet(
    "instruction-following verdicts",
    ("model", "variant", "id"),
    (Field("recognized", yes_no), Field("met", yes_no)),
    "rater",
)


@dataclass(frozen=True)
class Rating:
    item: tuple[str, ...]
    values: dict[str, Any]  # the filled-in value columns
    rater: str
    file: str  # the CSV file, or the review desk's store
    row: int  # line of the CSV file (the header is line 1), or row of the store's log
    sha256: str  # of the file it came from
    unit: str = "line"  # what ``row`` counts: "line" of a CSV file, "log_row" of a store

    def source(self) -> dict[str, Any]:
        return {"rater": self.rater, "file": self.file, self.unit: self.row, "sha256": self.sha256}

    def where(self) -> str:
        return f"{self.file}: {self.unit.replace('_', ' ')} {self.row}"


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
