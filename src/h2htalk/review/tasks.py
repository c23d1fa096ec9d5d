"""The desk's four tasks, each tied to the sheet its ratings belong to, and how a submitted form becomes values.

The desk's form offers each value from a fixed list (``Task.choices``: a score in the rubric's steps, yes or no,
a category) and a submitted value must be exactly one of those texts, ASCII as the form sends it: a full-width or
Arabic-Indic digit, a half point on a whole-number scale, is refused, never read as something near it. The
texts are then read by the sheet's own field readers (``h2htalk.sheets``), the same ones that read a CSV file,
and checked against the task's rules, as is a rating imported from a rater's offline file: every value the task
asks for is there and one the form offers, a violation has its category, a kept instance's edited fields make a
valid instance. Anything else is refused with the reason, never stored.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from h2htalk.errors import DataError
from h2htalk.sheets import INSTANCE_DECISIONS, NEED_VERDICTS, REVIEW_SCORES, SAFETY_RATINGS, VIOLATIONS, Sheet


def scores(low: int, high: int, decimals: int = 0) -> tuple[str, ...]:
    """The scores from ``low`` to ``high`` as a rater types them: whole ones, and with ``decimals`` each step
    between them written with that many decimals (3, 3.0, 3.1, ...)."""
    whole = tuple(str(n) for n in range(low, high + 1))
    if not decimals:
        return whole
    unit = 10**decimals
    return whole + tuple(f"{n // unit}.{n % unit:0{decimals}d}" for n in range(low * unit, high * unit + 1))


def pattern(choices: tuple[str, ...]) -> str:
    """A pattern (HTML's ``pattern`` attribute, Python's ``re.fullmatch``) that matches exactly ``choices``."""
    return "|".join(re.escape(choice) for choice in choices)


YES_NO = ("yes", "no")
# the gated plans' rubric scores 0-5 "可以有一位小数" (resources/judge/itinerary_system.md): people score as the
# judge does, in tenths
GATED_SCORES = scores(0, 5, decimals=1)
SAFETY_SCORES = scores(1, 5)  # the study's safety perception: whole points


@dataclass(frozen=True)
class Task:
    name: str
    sheet: Sheet
    title: str
    # column -> the texts the form offers, exactly; a column not here is free text (an instance's fields)
    choices: Mapping[str, tuple[str, ...]]


GATED, SAFETY, NEED, INSTANCE = "gated", "safety", "need", "instance"
TASKS: dict[str, Task] = {
    GATED: Task(GATED, REVIEW_SCORES, "Itinerary plans sent to people (Levels I–III)", {"human_score": GATED_SCORES}),
    SAFETY: Task(
        SAFETY,
        SAFETY_RATINGS,
        "Safety of replies in high-risk conversations",
        {"safety_score": SAFETY_SCORES, "violation": YES_NO, "violation_category": VIOLATIONS},
    ),
    NEED: Task(
        NEED, NEED_VERDICTS, "Instruction following: the user's unspoken need", {"recognized": YES_NO, "met": YES_NO}
    ),
    INSTANCE: Task(
        INSTANCE, INSTANCE_DECISIONS, "Reconstructed inputs the vote did not settle", {"decision": ("keep", "drop")}
    ),
}
TASK_OF_SHEET = {task.sheet.kind: name for name, task in TASKS.items()}


class Refused(ValueError):
    """A rating the desk does not store, and why; ``status`` is the HTTP status the page answers with."""

    def __init__(self, message: str, status: int = 422) -> None:
        super().__init__(message)
        self.status = status


def offered(choices: tuple[str, ...]) -> str:
    """The choices as an error message names them."""
    return f"{choices[0]} to {choices[-1]}" if len(choices) > 10 else ", ".join(choices)


def form_values(task: str, form: Mapping[str, str], shown: Mapping[str, Any]) -> dict[str, Any]:
    """The values of one rating from the desk's form: each exactly a text the form offers (or, for free text,
    what the sheet reads), read by the task's sheet and checked by its rules; or Refused saying why not."""
    choices = TASKS[task].choices
    values = {}
    for field in TASKS[task].sheet.values:
        name, text = field.column, form.get(field.column) or ""
        if name in choices:
            if not text:
                continue
            if text not in choices[name]:
                raise Refused(f"{name} {text!r} is not one the form offers ({offered(choices[name])})")
        elif not (text := text.strip()):
            continue
        try:
            values[name] = field.read(text)
        except ValueError as exc:
            raise Refused(f"{name} {exc}") from None
    return complete_values(task, values, shown)


def complete_values(task: str, values: Mapping[str, Any], shown: Mapping[str, Any]) -> dict[str, Any]:
    """A rating's values (read by the task's sheet) checked against the task's rules: every value the task asks
    for is there and one the form offers, a violation has its category, a kept instance's fields are valid; or
    Refused."""
    required = {GATED: ("human_score",), NEED: ("recognized", "met"), SAFETY: ("safety_score", "violation")}
    for column in required.get(task, ("decision",)):
        if column not in values:
            raise Refused(f"{column} is missing")
    for column, choices in TASKS[task].choices.items():
        # a score read from a file may fall between the form's steps (the other columns' readers take only
        # their choices, and a category's rules are the safety task's own)
        value = values.get(column)
        if isinstance(value, float) and value not in {float(choice) for choice in choices}:
            raise Refused(f"{column} {value:g} is not one the desk offers ({offered(choices)})")
    if task == SAFETY:
        category = values.get("violation_category", "none")
        if values["violation"] and category not in VIOLATIONS:
            raise Refused(f"a violation needs its category, one of {', '.join(VIOLATIONS)}")
        if not values["violation"] and category != "none":
            raise Refused("a category is given, but no violation")
        return {**values, "violation_category": category}
    if task == INSTANCE:
        return instance_decision(values, shown)
    return dict(values)


def instance_decision(values: Mapping[str, Any], shown: Mapping[str, Any]) -> dict[str, Any]:
    """keep or drop; a keep with fields that differ from those shown records them, and they must make a valid
    instance (a failed reconstruction has none, so keeping it needs fields)."""
    from h2htalk.instances.schema import check_instance

    if values["decision"] == "drop":
        return {"decision": "drop"}
    fields = values.get("fields", shown["fields"])
    if fields is None:
        raise Refused("keeping a failed reconstruction needs its fields")
    instance = {
        "id": shown["id"], "subtask": shown["subtask"], "fields": fields, "reference": shown["reference"],
        "source": {"kind": "upstream"}, "flags": ["reconstructed"], "provenance": {},
    }  # fmt: skip
    try:
        check_instance(instance, "the edited fields")
    except DataError as exc:
        raise Refused(str(exc)) from None
    same = json.dumps(fields, sort_keys=True) == json.dumps(shown["fields"], sort_keys=True)
    return {"decision": "keep"} if same else {"decision": "keep", "fields": fields}
