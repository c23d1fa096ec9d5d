"""Read a judge's verdict whole, or not at all: one reader for every judge.

A judge's verdict is its one JSON object (``llm.parse.read_verdict`` finds it, after this request's closer and
never in what the reply repeats of the judged text). Each judge names the fields its verdict must hold and how
each is read (``score``, ``yes_no``); when any of them cannot be read, the verdict is unparseable as a whole:
missing and flagged, none of its other fields kept. A reply the reader cannot read at all (JSON nested deeper
than Python's recursion limit, say) is unparseable too, with the error as its reason: the judge's answer is
cached, so an exception would fail the job again on every rerun. A verdict in prose only ("总分：4/5"
with no JSON object) is unparseable for every judge alike: the safety and needs judges' verdicts are more than
one number, and reading a number from prose for one judge but not the others would make them disagree.

Forms every judge reads alike (after NFKC, so full-width digits and slashes count as ASCII):
- a score: a JSON number; a string holding one decimal number, optionally followed by 分 and/or by "/" and the
  top of the judge's scale ("4", "４", "4分", "4/5", "4 / 5", "４／５分"). Rejected: a number outside the scale,
  NaN and infinities, true/false, another scale ("8/10"), ranges ("3-4"), several numbers, and Chinese numerals
  ("四分"): a judge asked for a number that writes a word is not trusted to mean one.
- a yes/no: true/false, or the strings true/false, yes/no, 是/否 (any case). Rejected: numbers, null, other words.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from h2htalk.llm.fences import Fence
from h2htalk.llm.parse import read_verdict, strip_code_fences

EVIDENCE_CHARS = 2000  # what a verdict keeps of its evidence, or of an answer it could not read
_SCORE = re.compile(r"(\d+(?:\.\d+)?)\s*分?\s*(?:/\s*(\d+(?:\.\d+)?)\s*分?)?")
_YES_NO = {"true": True, "false": False, "yes": True, "no": False, "是": True, "否": False}

FieldReader = Callable[[Any], Any]  # a field's value as read, or None when it is rejected


def score(low: float, high: float) -> FieldReader:
    """A reader of scores on the scale [low, high] (the forms of the module's docstring)."""

    def read(value: Any) -> float | None:
        if isinstance(value, bool):
            number = None
        elif isinstance(value, int | float):
            number = float(value)
        elif isinstance(value, str) and (found := _SCORE.fullmatch(unicodedata.normalize("NFKC", value).strip())):
            top = found.group(2)
            number = float(found.group(1)) if top is None or float(top) == high else None
        else:
            number = None
        return number if number is not None and math.isfinite(number) and low <= number <= high else None

    return read


def yes_no(value: Any) -> bool | None:
    """A yes/no value as judges write it, or None when it is neither."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return _YES_NO.get(unicodedata.normalize("NFKC", value).strip().lower())
    return None


@dataclass(frozen=True)
class Reading:
    """A verdict as read: every field (``values``), or None; how (``parse``: "json", "cut_off", "ambiguous",
    "unparseable"); the judge's evidence (its answer, shortened, when no verdict was read); the field that was
    rejected, if one was; and why an unparseable reply was not read where the reader knows more than that
    (``reason``: it repeats the judged text, its verdict is outside the judge's own part, reading it failed)."""

    values: dict[str, Any] | None
    parse: str
    evidence: str
    rejected: str | None = None
    reason: str | None = None

    def get(self, name: str) -> Any:
        return None if self.values is None else self.values[name]


def read_fields(
    text: str | None,
    finish_reason: str | None,
    key: str,
    fields: Mapping[str, FieldReader],
    fence: Fence,
    evidence_key: str = "evidence",
) -> Reading:
    """The verdict object that holds ``key`` in the reply to the request fenced by ``fence``, its ``fields`` read
    by their readers; unparseable as a whole when any field is missing or rejected, or the reply cannot be read."""
    answer = strip_code_fences(text).strip()[:EVIDENCE_CHARS]
    try:
        obj, how, reason = read_verdict(text, key, fence, finish_reason)
        if obj is None:
            return Reading(None, how, answer, reason=reason)
        values = {name: reader(obj.get(name)) for name, reader in fields.items()}
        rejected = next((name for name, value in values.items() if value is None), None)
        if rejected is not None:
            return Reading(None, "unparseable", answer, rejected)
        return Reading(values, "json", str(obj.get(evidence_key, "")).strip()[:EVIDENCE_CHARS])
    except Exception as error:  # any failure to read is an unread verdict, never a failed job
        return Reading(None, "unparseable", answer, reason=f"the reply could not be read: {type(error).__name__}")
