"""The one strict importer of what people fill in (the sheets of ``h2htalk.sheets``).

People rate at the review desk (``h2htalk.review``), whose store (``h2htalk.desk_store``, a layer below this
module) keeps every rating in an append-only log, or in CSV files. Every file is read whole and checked before
anything is used: a missing column, an unknown item, a value that is not one the desk's form offers (read by the
sheet's readers, exactly), or one rater rating one item twice (items compared as their sheet reads them: desk item
07 is item 7) is an error naming the file, the line, the column and the text, and nothing of any file is imported
then. Lines are counted as an editor counts them: a quoted cell may hold line breaks (the desk's own export has
such cells), so a row may span several lines, and a problem names the line its cell starts on. A cell that is
empty or holds only spaces is not filled in. A store's ratings pass the same checks beside the files.
"""

from __future__ import annotations

import csv
import os
import re
from collections.abc import Callable, Iterable

from h2htalk.desk_store.store import store_ratings
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
    quoted,
)

# the sheets and their readers are defined below this module (``h2htalk.sheets``); their users import them here
__all__ = [
    "INSTANCE_DECISIONS", "NEED_VERDICTS", "REVIEW_SCORES", "SAFETY_RATINGS", "Rating", "Sheet", "checksums",
    "import_error", "known_items", "read_ratings",
]  # fmt: skip

MAX_PROBLEMS = 20  # listed in one error; the rest are counted

ItemCheck = Callable[[tuple[str, ...]], str | None]  # why an item (named) is not one the caller knows, or None
LINE_BREAK = re.compile(r"\r\n|\r|\n")


def read_ratings(
    paths: Iterable[str | os.PathLike[str]],
    sheet: Sheet,
    check_item: ItemCheck,
    store: str | os.PathLike[str] | None = None,
) -> list[Rating]:
    """Every rated row of every file, and every rating of the sheet in the review desk's ``store`` (when given and
    there), or an error listing each problem with its file and row."""
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
            problems.append(
                f"{rating.where()}: {sheet.rater} {quoted(rating.rater)} rated {item_named(sheet, rating.item)} again"
                f" (first in {earlier.where()})"
            )
    if problems:
        raise import_error(sheet.kind, problems)
    return ratings


def import_error(kind: str, problems: list[str]) -> DataError:
    """The error of an import that found ``problems``: each one (up to MAX_PROBLEMS), and nothing imported."""
    shown = "\n".join(f"  - {p}" for p in problems[:MAX_PROBLEMS])
    more = f"\n  ... and {len(problems) - MAX_PROBLEMS} more" if len(problems) > MAX_PROBLEMS else ""
    return DataError(f"cannot import the {kind}; nothing was imported:\n{shown}{more}")


def item_named(sheet: Sheet, item: tuple[str, ...]) -> str:
    """An item as a problem names it: its columns and what they hold, as read (``model/variant/id 'm/sap/t1'``)."""
    return f"{'/'.join(sheet.item)} {'/'.join(item)!r}"


def records(path: str) -> list[tuple[int, list[str]]]:
    """The records of a CSV file, each with the line it starts on (the first is 1), blank lines skipped; or
    ValueError saying where it stops being CSV, or that it is not UTF-8 text."""
    found: list[tuple[int, list[str]]] = []
    end = 0
    with open(path, encoding="utf-8-sig", newline="") as handle:
        reader = csv.reader(handle)
        try:
            for record in reader:
                start, end = end + 1, reader.line_num
                if record:
                    found.append((start, record))
        except csv.Error as exc:
            raise ValueError(f"line {end + 1}: not readable as CSV ({exc})") from None
        except UnicodeDecodeError:
            raise ValueError("not UTF-8 text: save it as UTF-8 (CSV UTF-8 in a spreadsheet)") from None
    return found


def cell_lines(start: int, record: list[str]) -> list[int]:
    """The line each cell of a record that starts on line ``start`` starts on: after every line break the cells
    before it hold."""
    lines = []
    for cell in record:
        lines.append(start)
        start += len(LINE_BREAK.findall(cell))
    return lines


def _read_file(path: str, sheet: Sheet, check_item: ItemCheck, problems: list[str]) -> list[Rating]:
    try:
        rows = records(path)
    except FileNotFoundError:
        problems.append(f"{path}: file not found")
        return []
    except ValueError as exc:
        problems.append(f"{path}: {exc}")
        return []
    header = [normalise(name) for name in rows[0][1]] if rows else []
    needed = [*sheet.item, *(f.column for f in sheet.values if f.required), sheet.rater]
    missing = [column for column in needed if column not in header]
    if missing:
        problems.append(f"{path}: line 1: missing column {', '.join(missing)} (the {sheet.kind} need it)")
        return []
    twice = sorted({c for c in header if header.count(c) > 1} & {*needed, *(f.column for f in sheet.values)})
    if twice:
        problems.append(f"{path}: line 1: column {', '.join(twice)} is there twice")
        return []
    index = {name: number for number, name in enumerate(header)}
    digest = sha256_file(path)
    ratings = []
    for start, record in rows[1:]:
        lines = cell_lines(start, record)
        # column -> its text and the line it starts on (a missing cell: the record's last)
        cells = {
            name: (record[at] if at < len(record) else "", lines[min(at, len(lines) - 1)]) for name, at in index.items()
        }
        filled = [f for f in sheet.values if f.column in cells and cells[f.column][0].strip()]
        if not filled:
            continue
        item = []
        for column in sheet.item:
            text, line = cells[column]
            try:
                item.append(sheet.read_item(column, text))
            except ValueError as exc:
                problems.append(f"{path}: line {line}: {column} {quoted(text)} {exc}")
        if len(item) < len(sheet.item):
            continue
        if (problem := check_item(tuple(item))) is not None:
            problems.append(f"{path}: line {cells[sheet.item[0]][1]}: {problem}")
            continue
        values = {}
        for field in filled:
            text, line = cells[field.column]
            try:
                values[field.column] = field.read(text)
            except ValueError as exc:
                problems.append(f"{path}: line {line}: {field.column} {quoted(text)} {exc}")
        if len(values) == len(filled):
            ratings.append(Rating(tuple(item), values, normalise(cells[sheet.rater][0]), path, start, digest))
    return ratings


def known_items(items: Iterable[tuple[str, ...]], what: str) -> ItemCheck:
    """A check that accepts exactly ``items``."""
    known = set(items)
    return lambda item: None if item in known else f"{what} {'/'.join(item)} is not one of this run's"


def checksums(paths: Iterable[str | os.PathLike[str]]) -> list[dict[str, str]]:
    """Where people's files came from, for provenance."""
    return [{"file": str(path), "sha256": sha256_file(path)} for path in paths]
