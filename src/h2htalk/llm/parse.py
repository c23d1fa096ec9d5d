"""Read structured verdicts out of model answers: JSON objects inside free text, and yes/no values.

Judges are asked for one JSON object, but models wrap it in prose or code fences, or write several objects.
Every caller reads answers through these functions, so all of them agree on what an answer says.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

_FENCE = re.compile(r"```(?:json)?")
_YES_NO = {"true": True, "false": False, "yes": True, "no": False, "是": True, "否": False}


def strip_fences(text: str | None) -> str:
    return _FENCE.sub("", text or "")


def json_object_spans(text: str) -> list[tuple[int, str]]:
    """Every balanced {...} span with its start offset, in the order the spans close (inner before outer)."""
    spans, stack = [], []
    for index, ch in enumerate(text):
        if ch == "{":
            stack.append(index)
        elif ch == "}" and stack:
            start = stack.pop()
            spans.append((start, text[start : index + 1]))
    return spans


def _parsed(spans: list[tuple[int, str]]) -> list[Any]:
    out = []
    for _, span in spans:
        try:
            out.append(json.loads(span))
        except json.JSONDecodeError:
            continue
    return out


def objects_with(text: str | None, key: str) -> Iterator[dict[str, Any]]:
    """The JSON objects in the answer that have ``key``, last-closing first (a trailing verdict wins)."""
    for obj in reversed(_parsed(json_object_spans(strip_fences(text)))):
        if isinstance(obj, dict) and key in obj:
            yield obj


def last_object_with(text: str | None, key: str) -> dict[str, Any] | None:
    return next(objects_with(text, key), None)


def first_json_value(text: str | None) -> Any:
    """The earliest-starting balanced {...} span that parses as JSON; ValueError when there is none."""
    for value in _parsed(sorted(json_object_spans(strip_fences(text)))):
        return value
    raise ValueError("no JSON object in the answer")


def cut_off(text: str | None, finish_reason: str | None = None) -> bool:
    """The answer stopped at its token limit, or opens a JSON object it never closes: whatever it says so far
    is not a verdict (a cut-off evidence list can hold sub-scores that look like one)."""
    if finish_reason == "length":
        return True
    cleaned = strip_fences(text)
    return cleaned.count("{") > cleaned.count("}")


def parse_bool(value: Any) -> bool | None:
    """A yes/no value as judges write it (true/false, yes/no, 是/否), or None when it is neither."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return _YES_NO.get(value.strip().lower())
    return None
