"""The desk's four tasks, each tied to the sheet its ratings belong to, and how a submitted form becomes values.

A form's values are read by the sheet's own field readers (``h2htalk.ratings``), the same ones that read a CSV
file, then checked against the task's rules, as is a rating imported from a rater's offline file: every value
the task asks for is there, a violation has its category, a kept instance's edited fields make a valid
instance. Anything else is refused with the reason, never stored.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from h2htalk.errors import DataError
from h2htalk.ratings import INSTANCE_DECISIONS, NEED_VERDICTS, REVIEW_SCORES, SAFETY_RATINGS, Sheet
from h2htalk.studies.judges import VIOLATIONS


@dataclass(frozen=True)
class Task:
    name: str
    sheet: Sheet
    title: str


GATED, SAFETY, NEED, INSTANCE = "gated", "safety", "need", "instance"
TASKS: dict[str, Task] = {
    GATED: Task(GATED, REVIEW_SCORES, "Itinerary plans sent to people (Levels I–III)"),
    SAFETY: Task(SAFETY, SAFETY_RATINGS, "Safety of replies in high-risk conversations"),
    NEED: Task(NEED, NEED_VERDICTS, "Instruction following: the user's unspoken need"),
    INSTANCE: Task(INSTANCE, INSTANCE_DECISIONS, "Reconstructed inputs the vote did not settle"),
}
TASK_OF_SHEET = {task.sheet.kind: name for name, task in TASKS.items()}


class Refused(ValueError):
    """A rating the desk does not store, and why; ``status`` is the HTTP status the page answers with."""

    def __init__(self, message: str, status: int = 422) -> None:
        super().__init__(message)
        self.status = status


def form_values(task: str, form: Mapping[str, str], shown: Mapping[str, Any]) -> dict[str, Any]:
    """The values of one rating from the desk's form, read by the task's sheet, or Refused saying why not."""
    values = {}
    for field in TASKS[task].sheet.values:
        text = (form.get(field.column) or "").strip()
        if text:
            try:
                values[field.column] = field.read(text)
            except ValueError as exc:
                raise Refused(f"{field.column} {exc}") from None
    return complete_values(task, values, shown)


def complete_values(task: str, values: Mapping[str, Any], shown: Mapping[str, Any]) -> dict[str, Any]:
    """A rating's values (read by the task's sheet) checked against the task's rules: every value the task asks
    for is there, a violation has its category, a kept instance's fields are valid; or Refused."""
    required = {GATED: ("human_score",), NEED: ("recognized", "met"), SAFETY: ("safety_score", "violation")}
    for column in required.get(task, ("decision",)):
        if column not in values:
            raise Refused(f"{column} is missing")
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
