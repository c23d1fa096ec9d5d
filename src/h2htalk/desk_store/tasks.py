"""The desk's four tasks, each tied to the sheet its ratings belong to, and how a submitted form becomes values.

The desk's form offers each value from a fixed list (``Task.choices``, the sheet's own: a score in the rubric's
steps, yes or no, a category) and a submitted value is read by the sheet's field readers (``h2htalk.sheets``), the
same ones that read a CSV file: exactly one of those texts, ASCII as the form sends it, or refused (a full-width
or Arabic-Indic digit, a half point on a whole-number scale is never read as something near it). The values are
then checked against the task's rules, as are a rating imported from a rater's offline file and one given to the
store's API: every value the task asks for is there and one the form gives, a violation has its category, a
kept instance's edited fields make a valid instance. Anything else is refused with the reason, never stored.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from h2htalk.errors import DataError
from h2htalk.instance_schema import check_instance
from h2htalk.sheets import INSTANCE_DECISIONS, NEED_VERDICTS, REVIEW_SCORES, SAFETY_RATINGS, VIOLATIONS, Sheet, quoted


def pattern(choices: tuple[str, ...]) -> str:
    """A pattern (HTML's ``pattern`` attribute, Python's ``re.fullmatch``) that matches exactly ``choices``."""
    return "|".join(re.escape(choice) for choice in choices)


@dataclass(frozen=True)
class Task:
    name: str
    sheet: Sheet
    title: str

    @property
    def choices(self) -> dict[str, tuple[str, ...]]:
        """column -> the texts the form offers, exactly; a column not here is free text (an instance's fields)."""
        return {field.column: field.choices for field in self.sheet.values if field.choices}


GATED, SAFETY, NEED, INSTANCE = "gated", "safety", "need", "instance"
TASKS: dict[str, Task] = {
    GATED: Task(GATED, REVIEW_SCORES, "Itinerary plans sent to people (Levels I–III)"),
    SAFETY: Task(SAFETY, SAFETY_RATINGS, "Safety of replies in high-risk conversations"),
    NEED: Task(NEED, NEED_VERDICTS, "Instruction following: the user's unspoken need"),
    INSTANCE: Task(INSTANCE, INSTANCE_DECISIONS, "Reconstructed inputs the vote did not settle"),
}
TASK_OF_SHEET = {task.sheet.kind: name for name, task in TASKS.items()}


class Refused(ValueError):
    """A rating the desk does not store, and why; ``status`` is the HTTP status the page answers with, ``index``
    which of several ratings stored together it is."""

    def __init__(self, message: str, status: int = 422, index: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.index = index


def form_values(task: str, form: Mapping[str, str], shown: Mapping[str, Any]) -> dict[str, Any]:
    """The values of one rating from the desk's form: each read by the task's sheet (a choice exactly as the form
    offers it; free text less the spaces around it) and checked by its rules; or Refused saying why not."""
    values = {}
    for field in TASKS[task].sheet.values:
        text = form.get(field.column) or ""
        if not field.choices:
            text = text.strip()  # free text (an instance's fields): less the spaces around it
        if not text:
            continue
        try:
            values[field.column] = field.read(text)
        except ValueError as exc:
            raise Refused(f"{field.column} {quoted(text)} {exc}") from None
    return complete_values(task, values, shown)


def complete_values(task: str, values: Mapping[str, Any], shown: Mapping[str, Any]) -> dict[str, Any]:
    """A rating's values checked against the task's rules, as the store keeps them: only the task's columns, every
    value the task asks for there and one its sheet reads from a text the form offers (4.0, never 4, -0.0 or
    "4"), a violation with its category (none without one), a kept instance's fields valid; or Refused. What it
    returns it takes again unchanged."""
    sheet = TASKS[task].sheet
    if unknown := sorted(set(values) - {field.column for field in sheet.values}):
        raise Refused(f"{', '.join(unknown)}: not a column of the {task} task")
    required = {GATED: ("human_score",), NEED: ("recognized", "met"), SAFETY: ("safety_score", "violation")}
    for column in required.get(task, ("decision",)):
        if column not in values:
            raise Refused(f"{column} is missing")
    for field in sheet.values:
        # compared as stored (JSON), so that 4 for 4.0, True for 1 or -0.0 for 0.0 is refused; the category, whose
        # stored "none" the form never sends, is the safety rules' below
        if field.choices and field.column in values and field.column != "violation_category":
            given = json.dumps(values[field.column])
            if given not in {json.dumps(field.read(choice)) for choice in field.choices}:
                raise Refused(f"{field.column} {given} is not a value the form gives ({', '.join(field.choices)})")
    if task == SAFETY:
        category = values.get("violation_category", "none")
        if values["violation"] and category not in VIOLATIONS:
            raise Refused(f"violation yes needs its violation_category, one of {', '.join(VIOLATIONS)}")
        if not values["violation"] and category != "none":
            raise Refused(f"violation_category {category!r} is given, but violation is no")
        return {**values, "violation_category": category}
    if task == INSTANCE:
        return instance_decision(values, shown)
    return dict(values)


def instance_decision(values: Mapping[str, Any], shown: Mapping[str, Any]) -> dict[str, Any]:
    """keep or drop; a keep with fields that differ from those shown records them, and they must make a valid
    instance (a failed reconstruction has none, so keeping it needs fields)."""
    if values["decision"] == "drop":
        return {"decision": "drop"}
    fields = values.get("fields", shown["fields"])
    if fields is None:
        raise Refused("decision keep of a failed reconstruction needs its fields")
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
