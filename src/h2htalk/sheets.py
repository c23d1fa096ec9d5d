"""What people fill in, and how each value is read: the four sheets (review scores, safety ratings, decisions on
instances, instruction-following verdicts), their columns and readers, and one rating as read.

The lowest layer of people's ratings: the review desk's store (``h2htalk.desk_store``), the importer of CSV files
(``h2htalk.ratings``), the review desk (``h2htalk.review``) and the safety judge (its violation categories) all
build on it, and it imports none of them. A value is read one way everywhere, here: the desk's form, an offline
file, any other CSV file and a rating stored through the store's own API take exactly the texts the form offers
(``Field.choices``), as the form writes them, and nothing near them: no surrounding spaces, no other case, no full-
width or Arabic-Indic digits, no other spelling of a number (``+4``, ``04``, ``4.00``, ``1e0``, ``0_5``, ``-0``).
Where the form offers both ``4`` and ``4.0`` (the gated scores, in tenths) both are read, as 4.0; where it offers
whole points only, ``4.0`` is refused.
Items' ids and columns' names are compared as ``normalise`` makes them (NFKC, no surrounding spaces).
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# harmful responses, in the paper's sense of a violation (resources/studies/safety_judge.md defines each); an
# omission, such as no help channel where risk was raised, is none of them
VIOLATIONS: tuple[str, ...] = (
    "dismissing", "changing_subject", "harmful_advice", "fostering_dependence", "crossing_boundaries", "other",
)  # fmt: skip
YES_NO = {"yes": True, "no": False}


def normalise(text: str) -> str:
    """An item's id or a column's name as compared: NFKC (full-width letters and digits as ASCII), no surrounding
    spaces. Never a value: values are read exactly (``chosen``)."""
    return unicodedata.normalize("NFKC", text).strip()


def scores(low: int, high: int, decimals: int = 0) -> tuple[str, ...]:
    """The scores from ``low`` to ``high`` as the desk's form takes them: whole ones, and with ``decimals`` each step
    between them written with that many decimals (3, 3.0, 3.1, ...)."""
    whole = tuple(str(n) for n in range(low, high + 1))
    if not decimals:
        return whole
    unit = 10**decimals
    return whole + tuple(f"{n // unit}.{n % unit:0{decimals}d}" for n in range(low * unit, high * unit + 1))


def offered(choices: Sequence[str]) -> str:
    """The choices as an error message names them."""
    return f"{choices[0]} to {choices[-1]}" if len(choices) > 10 else ", ".join(choices)


def quoted(text: str, most: int = 60) -> str:
    """A cell's text as an error message shows it: quoted, escapes visible, cut short."""
    return repr(text) if len(text) <= most else f"{text[:most]!r}…"


def not_offered(text: str, choices: Sequence[str], says: str) -> str:
    """Why ``text`` is not read: it is not one of ``choices``; and, where it would be one with its spaces or its
    non-ASCII characters taken away, that it must be written without them."""
    why = f"is not one the form offers ({says})"
    if text.strip() in choices:
        return f"{why}: write it without the spaces around it"
    if normalise(text) in choices:
        return f"{why}: write it in ASCII, as the form does"
    if normalise(text).lower() in choices:
        return f"{why}: write it in lower case, as the form does"
    return why


def chosen(values: Mapping[str, Any], says: str = "") -> Callable[[str], Any]:
    """A reader that takes exactly the texts of ``values`` (text -> the value stored) and nothing else: no
    surrounding spaces, no other case, no other digits, no other spelling of a number. Its ValueError says why,
    not what: the caller names the column and the text."""
    says = says or offered(list(values))

    def read(text: str) -> Any:
        if text in values:
            return values[text]
        raise ValueError(not_offered(text, list(values), says))

    return read


def json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"is not valid JSON ({exc.msg})") from None
    if not isinstance(value, dict):
        raise ValueError("is not a JSON object")
    return value


@dataclass(frozen=True)
class Field:
    """A column people fill in; ``read`` turns its text into a value or raises ValueError saying why not (as in
    "is not ...", the caller naming the column and the text before it)."""

    column: str
    read: Callable[[str], Any]
    choices: tuple[str, ...] = ()  # the texts the desk's form offers, the only ones ``read`` takes; () free text
    required: bool = True  # the column must be there (its cells may be empty: not rated yet)


def offered_field(column: str, values: Mapping[str, Any], says: str = "", required: bool = True) -> Field:
    """A column whose cells are exactly one of the texts of ``values`` (text -> the value stored)."""
    return Field(column, chosen(values, says), tuple(values), required)


@dataclass(frozen=True)
class Sheet:
    """One kind of file people fill in: the columns that name the item, those that hold the rating (a row
    with none of them filled in is not rated yet), and the one that names who rated. ``read_item`` reads a cell
    of the item's columns (column, text; by default ``normalise``s it) or raises ValueError ("is not ...")."""

    kind: str
    item: tuple[str, ...]
    values: tuple[Field, ...]
    rater: str
    read_item: Callable[[str, str], str] = lambda column, text: normalise(text)


def score_scale(low: int, high: int, decimals: int = 0) -> dict[str, float]:
    return {text: float(text) for text in scores(low, high, decimals)}


# the gated plans' rubric scores 0-5 "可以有一位小数" (resources/judge/itinerary_system.md): people score as the
# judge does, in tenths, written 3, 3.0 or 3.5 (never 3.50, 03, 3. or .5)
GATED_SCORES = score_scale(0, 5, decimals=1)
SAFETY_SCORES = score_scale(1, 5)  # the study's safety perception: whole points

REVIEW_SCORES = Sheet(
    "review scores",
    ("model", "variant", "subtask", "id"),
    (offered_field("human_score", GATED_SCORES, "0 to 5, whole or in tenths, such as 3, 3.0 or 3.5"),),
    "reviewer",
)
SAFETY_RATINGS = Sheet(
    "safety ratings",
    ("model", "variant", "id"),
    (
        offered_field("safety_score", SAFETY_SCORES),
        offered_field("violation", YES_NO),
        # empty where there is no violation
        offered_field("violation_category", {v: v for v in VIOLATIONS}, required=False),
    ),
    "rater",
)
INSTANCE_DECISIONS = Sheet(
    "instance decisions",
    ("id",),
    (offered_field("decision", {"keep": "keep", "drop": "drop"}), Field("fields", json_object, required=False)),
    "reviewer",
)
NEED_VERDICTS = Sheet(
    "instruction-following verdicts",
    ("model", "variant", "id"),
    (offered_field("recognized", YES_NO), offered_field("met", YES_NO)),
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
    log_head: str = ""  # of a store: its log's chain head when read (``h2htalk.desk_store.chain``)

    def source(self) -> dict[str, Any]:
        head = {"log_head": self.log_head} if self.unit == "log_row" else {}
        return {"rater": self.rater, "file": self.file, self.unit: self.row, "sha256": self.sha256, **head}

    def where(self) -> str:
        return f"{self.file}: {self.unit.replace('_', ' ')} {self.row}"
