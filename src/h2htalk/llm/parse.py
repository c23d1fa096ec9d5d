"""Find a judge's verdict object in its answer: complete JSON objects inside free text.

Judges are asked for one JSON object, but models wrap it in prose or code fences, quote the answer they judge,
or write several objects. Every caller finds verdicts through these functions, so all of them agree on which
object is the verdict. What the judged model wrote is never read in place of the judge's own verdict:

- The text a judge judges is fenced (``llm.fences``), and the reply is read after the last line that holds this
  request's closer (its nonce), or from its start when it holds none, up to the first other line that could be
  read as a marker: nothing from inside the fences, nor after a marker the judged text made up.
- What is left of the reply is compared with the fenced material after folding (``text_match.fold``, spaces
  removed): every run of ECHO_RUN or more characters it repeats is blanked (quotes and JSON escapes kept, so a
  judge's evidence that quotes the answer stays a valid string), but for runs the rest of the prompt holds too
  (the output format's ``{"evidence": "``, which a judge is asked to write); and a verdict object that is,
  folded, a piece of the material is set aside however short it is.
- A verdict is the one object holding the judge's key in what remains.

``llm.verdict`` reads the object's fields.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache, lru_cache
from itertools import repeat
from typing import Any

from h2htalk.llm.fences import UNFENCED, Fence, marker_like
from h2htalk.text_match import fold

_CODE_FENCE = re.compile(r"```(?:json)?")

_DECODER = json.JSONDecoder()
# where a JSON object can begin: "{" then a key, "}" or the end of the text ("{符号" in prose is not one)
_OBJECT_START = re.compile(r'\{\s*(?:"|\}|$)')
# a literal or number the text ends in the middle of ("tr", "fals", "1.", "-", "1e+")
_PARTIAL_TOKEN = re.compile(r"(?:t(?:ru?)?|f(?:a(?:ls?)?)?|n(?:ul?)?|-|\.|[eE][+-]?)\s*")
# a number written in full-width digits ("score": ４) is read as the same number in ASCII digits
_WIDE_DIGITS = {0xFF10 + digit: 0x30 + digit for digit in range(10)}
ECHO_RUN = 12  # folded characters in a row that a reply shares with the material: a repetition, not a chance
_JSON_ESCAPE = re.compile(r"\\(?:u[0-9a-fA-F]{4}|.)", re.S)
ECHOED = "the only verdict repeats the judged text"
OUTSIDE = "the only verdict is inside the fences or after a marker that is not this request's"


def strip_code_fences(text: str | None) -> str:
    return _CODE_FENCE.sub("", text or "")


@dataclass(frozen=True)
class JsonObjects:
    """The complete top-level JSON values of a text in order, and what follows the last of them: ``"open"`` (an
    object still open where the text ends: cut off), ``"malformed"`` (an object that breaks off mid-text) or
    None."""

    values: list[Any]
    trailing: str | None
    spans: list[tuple[int, int]]  # where each value is in the text


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
    spans: list[tuple[int, int]] = []
    trailing = None
    position = 0
    while (start := _OBJECT_START.search(text, position)) is not None:
        try:
            value, position = _DECODER.raw_decode(text, start.start())
        except json.JSONDecodeError as error:
            if _runs_to_end(text, error):
                return JsonObjects(values, "open", spans)
            # what the decoder read before it failed belongs to the broken object, nested objects included
            trailing, position = "malformed", max(error.pos, start.start() + 1)
            continue
        values.append(value)
        spans.append((start.start(), position))
        trailing = None
    return JsonObjects(values, trailing, spans)


def own_lines(text: str, fence: Fence) -> str:
    """The part of a reply that can be the judge's own: after the last line holding this request's closer (from
    the start when there is none), up to the first other line that could be read as a marker."""
    lines = text.split("\n")
    start = next((i + 1 for i in reversed(range(len(lines))) if fence.closes(lines[i])), 0)
    end = next((i for i in range(start, len(lines)) if marker_like(lines[i])), len(lines))
    return "\n".join(lines[start:end])


def _folded(text: str) -> tuple[str, list[int]]:
    """``text`` folded character by character, spaces removed, and where in ``text`` each folded character
    comes from."""
    chars, origins = [], []
    for index, char in enumerate(text):
        for folded in _fold_char(char):
            chars.append(folded)
            origins.append(index)
    return "".join(chars), origins


@cache
def _fold_char(char: str) -> str:
    return "".join(folded for folded in fold(char) if not folded.isspace())


def _runs(folded: str) -> set[str]:
    return {folded[i : i + ECHO_RUN] for i in range(len(folded) - ECHO_RUN + 1)}


@lru_cache(maxsize=64)
def _material(fence: Fence) -> tuple[frozenset[str], tuple[str, ...]]:
    """The material's folded runs of ECHO_RUN characters that the frame does not hold, and each part folded."""
    parts = tuple(_folded(part)[0] for part in fence.material)
    return frozenset(set().union(*map(_runs, parts)) - _runs(_folded(fence.frame)[0])), parts


def without_echoes(text: str, fence: Fence) -> str:
    """``text`` with every run of ECHO_RUN or more folded characters that it shares with the fence's material
    (and the frame does not hold) blanked, its quotes and JSON escapes kept (what the judge wrote around them
    stays as it was)."""
    runs, _ = _material(fence)
    folded, origins = _folded(text)
    echoed = [False] * len(text)
    for i in range(len(folded) - ECHO_RUN + 1):
        if folded[i : i + ECHO_RUN] in runs:
            echoed[origins[i] : origins[i + ECHO_RUN - 1] + 1] = repeat(
                True, origins[i + ECHO_RUN - 1] + 1 - origins[i]
            )
    for escape in _JSON_ESCAPE.finditer(text):
        echoed[escape.start() : escape.end()] = repeat(False, escape.end() - escape.start())
    return "".join(" " if hidden and char != '"' else char for char, hidden in zip(text, echoed, strict=True))


def _is_piece_of_material(text: str, fence: Fence) -> bool:
    _, parts = _material(fence)
    folded = _folded(text)[0]
    return any(folded in part for part in parts)


def _verdicts(text: str, key: str) -> tuple[JsonObjects, list[tuple[Any, str]]]:
    """The JSON objects of ``text``, and each object holding ``key`` with the text it was read from."""
    found = json_objects(text)
    spans = zip(found.values, found.spans, strict=True)
    return found, [(value, text[a:b]) for value, (a, b) in spans if isinstance(value, dict) and key in value]


def _one_verdict(text: str, key: str, fence: Fence) -> tuple[dict[str, Any] | None, str]:
    """The one verdict object of ``text`` that is not a piece of the material, and how it was read."""
    found, candidates = _verdicts(text, key)
    if found.trailing == "open":
        return None, "cut_off"
    verdicts = [value for value, span in candidates if not _is_piece_of_material(span, fence)]
    if found.trailing == "malformed" or not verdicts:
        return None, "unparseable"
    return (verdicts[0], "json") if len(verdicts) == 1 else (None, "ambiguous")


def read_verdict(
    text: str | None, key: str, fence: Fence, finish_reason: str | None = None
) -> tuple[dict[str, Any] | None, str, str | None]:
    """The judge's verdict object (the one complete top-level object holding ``key`` in ``own_lines`` without
    echoes, full-width digits read as ASCII), how it
    was read and, when the reply held a verdict that was not read, why: ``"json"``; ``"cut_off"`` (stopped at
    its token limit, or its own part ends inside an object); ``"ambiguous"`` (two or more verdict objects: which
    is the judge's own is not known); ``"unparseable"`` (no object holds ``key``, or an object after the last
    complete one breaks off, so that one need not be the verdict; why: ECHOED, the verdict is the judged text's,
    or OUTSIDE, it is inside the fences or after a marker of another request). Only "json" gives an object."""
    if finish_reason == "length":
        return None, "cut_off", None
    own = own_lines(text or "", fence)
    if json_objects(own).trailing == "open":
        return None, "cut_off", None
    obj, how = _one_verdict(without_echoes(own, fence).translate(_WIDE_DIGITS), key, fence)
    if how != "unparseable":
        return obj, how, None
    if _one_verdict(own.translate(_WIDE_DIGITS), key, UNFENCED)[1] != "unparseable":
        return None, how, ECHOED
    return None, how, OUTSIDE if _verdicts((text or "").translate(_WIDE_DIGITS), key)[1] else None


def cut_off(text: str | None, finish_reason: str | None = None, fence: Fence = UNFENCED) -> bool:
    """The answer stopped at its token limit, or its own part (``own_lines``) ends inside a JSON object:
    whatever it says so far is not a verdict (a cut-off evidence list can hold sub-scores that look like one).
    False when the reply cannot be read at all (it is then unparseable, not retried)."""
    if finish_reason == "length":
        return True
    try:
        return json_objects(own_lines(text or "", fence)).trailing == "open"
    except Exception:  # the reader says why (read_fields); a retry would not read it either
        return False


def first_json_value(text: str | None) -> Any:
    """The first complete top-level JSON object of the answer; ValueError when there is none."""
    values = json_objects(text or "").values
    if not values:
        raise ValueError("no JSON object in the answer")
    return values[0]
