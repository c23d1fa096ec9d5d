"""What people fill in, and how each value is read: the four sheets (review scores, safety ratings, decisions on
instances, instruction-following verdicts), their columns and readers, and one rating as read.

The lowest layer of people's ratings: the importer of CSV files (``h2htalk.ratings``), the review desk
(``h2htalk.review``) and the safety judge (its violation categories) all build on it, and it imports none of
them. Values are read the same way everywhere: full-width digits, letters and spaces as their ASCII forms (NFKC),
and yes/no in English or Chinese, or as a tick.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# harmful responses, in the paper's sense of a violation (resources/studies/safety_judge.md defines each); an
# omission, such as no help channel where risk was raised, is none of them
VIOLATIONS: tuple[str, ...] = (
    "dismissing", "changing_subject", "harmful_advice", "fostering_dependence", "crossing_boundaries", "other",
)  # fmt: skip

YES = ("yes", "y", "true", "1", "是", "对", "有", "x", "✓", "✔")
NO = ("no", "n", "false", "0", "否", "不是", "没有", "无")


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
