"""Find a judge's verdict object in its answer: complete JSON objects inside free text.

Judges are asked for one JSON object, but models wrap it in prose or code fences, quote the answer they judge,
or write several objects. Every caller finds verdicts through these functions, so all of them agree on which
object is the verdict. The text a judge judges is fenced (``llm.fences``), and a verdict is looked for only
after the last closing marker a judge echoes back, and only when it is the one verdict there: what the judged
model wrote is never read in place of the judge's own verdict. ``llm.verdict`` reads the object's fields.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from h2htalk.llm.fences import MARKER

_CODE_FENCE = re.compile(r"```(?:json)?")

_DECODER = json.JSONDecoder()
# where a JSON object can begin: "{" then a key, "}" or the end of the text ("{符号" in prose is not one)
_OBJECT_START = re.compile(r'\{\s*(?:"|\}|$)')
# a literal or number the text ends in the middle of ("tr", "fals", "1.", "-", "1e+")
_PARTIAL_TOKEN = re.compile(r"(?:t(?:ru?)?|f(?:a(?:ls?)?)?|n(?:ul?)?|-|\.|[eE][+-]?)\s*")
# a number written in full-width digits ("score": ４) is read as the same number in ASCII digits
_WIDE_DIGITS = {0xFF10 + digit: 0x30 + digit for digit in range(10)}


def strip_code_fences(text: str | None) -> str:
    return _CODE_FENCE.sub("", text or "")


@dataclass(frozen=True)
class JsonObjects:
    """The complete top-level JSON values of a text in order, and what follows the last of them: ``"open"`` (an
    object still open where the text ends: cut off), ``"malformed"`` (an object that breaks off mid-text) or
    None."""

    values: list[Any]
    trailing: str | None


def _runs_to_end(text: str, error: json.JSONDecodeError) -> bool:
    """Whether the decoder failed because the text ended (inside a string, before a value or delimiter, or in
    the middle of a literal or number), not because something before the end is not JSON."""
    return (
        error.msg.startswith("Unterminated string")
        or error.pos >= len(text.rstrip())
        or _PARTIAL_TOKEN.fullmatch(text, error.pos) is not None
    )


def json_objects(text: str) -> JsonObjects:
    """Scan ``text`` with a JSON decoder: each complete object is taken whole (braces inside its strings and the
    objects nested in it are part of it), and scanning resumes after it."""
    values: list[Any] = []
    trailing = None
    position = 0
    while (start := _OBJECT_START.search(text, position)) is not None:
        try:
            value, position = _DECODER.raw_decode(text, start.start())
        except json.JSONDecodeError as error:
            if _runs_to_end(text, error):
                return JsonObjects(values, "open")
            # what the decoder read before it failed belongs to the broken object, nested objects included
            trailing, position = "malformed", max(error.pos, start.start() + 1)
            continue
        values.append(value)
        trailing = None
    return JsonObjects(values, trailing)


def after_fences(text: str) -> str:
    """The text after the last fence marker a judge echoed back (anything before it may be the judged text), its
    full-width digits made ASCII."""
    closes = [found for found in MARKER.finditer(text) if found.group().startswith("<<</")]
    return (text[closes[-1].end() :] if closes else text).translate(_WIDE_DIGITS)


def read_verdict(text: str | None, key: str, finish_reason: str | None = None) -> tuple[dict[str, Any] | None, str]:
    """The judge's verdict object (the one complete top-level object holding ``key``) and how it was read:
    ``"json"``; ``"cut_off"`` (stopped at its token limit, or an object still open at the end); ``"ambiguous"``
    (two or more verdict objects: which is the judge's own is not known); ``"unparseable"`` (no object holds
    ``key``, or an object after the last complete one breaks off, so that one need not be the verdict). Only
    "json" gives an object."""
    if finish_reason == "length":
        return None, "cut_off"
    found = json_objects(after_fences(text or ""))
    if found.trailing == "open":
        return None, "cut_off"
    verdicts = [value for value in found.values if isinstance(value, dict) and key in value]
    if found.trailing == "malformed" or not verdicts:
        return None, "unparseable"
    return (verdicts[0], "json") if len(verdicts) == 1 else (None, "ambiguous")


def cut_off(text: str | None, finish_reason: str | None = None) -> bool:
    """The answer stopped at its token limit, or ends inside a JSON object: whatever it says so far is not a
    verdict (a cut-off evidence list can hold sub-scores that look like one)."""
    return finish_reason == "length" or json_objects(after_fences(text or "")).trailing == "open"


def first_json_value(text: str | None) -> Any:
    """The first complete top-level JSON object of the answer; ValueError when there is none."""
    values = json_objects(text or "").values
    if not values:
        raise ValueError("no JSON object in the answer")
    return values[0]
