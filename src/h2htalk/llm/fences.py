"""Fence the material a judge reads, so that nothing in it can pose as a marker of the prompt.

Each fenced part sits between an opening and a closing marker line, ``<<<回答 n>>>`` ... ``<<</回答 n>>>``, whose
``n`` is the request's nonce: a hash of everything the request fences. The nonce is a function of the content,
so the same request has the same messages and the same cache key in every run (the caches stay valid), while a
judged answer cannot name its own request's nonce: it would have to contain the hash of itself.

The nonce is the second wall. The first is the escape: a model reads ``＜<<`` or ``<<\u200b<`` much as it reads
``<<<``, so a line of the material is compared with a marker after folding (NFKC, which maps full-width and
small-form brackets to ``<``, then removing the format characters: zero-width spaces and joiners, soft hyphens,
bidi marks). A line whose folded form, spaces removed, holds three angle brackets in a row has every character
that folds to a bracket replaced by ``‹`` or ``›``, which fold to themselves: no line of the material folds to
a marker, whatever nonce it guesses.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Mapping

NONCE_CHARS = 16  # hex digits: 64 bits
# a marker line as the folded text shows it: "<<<label nonce>>>" or "<<</label nonce>>>"
MARKER = re.compile(r"<<</?[^<>\n]{1,60}>>>")
_MARKERISH = re.compile(r"<<<|>>>")
_ESCAPES = {"<": "‹", ">": "›"}


def fold(text: str) -> str:
    """``text`` as a reader that ignores width and invisible characters sees it: NFKC, format characters (Unicode
    category Cf) removed."""
    normal = unicodedata.normalize("NFKC", text)
    return "".join(char for char in normal if unicodedata.category(char) != "Cf")


def _bracket(char: str) -> str | None:
    folded = unicodedata.normalize("NFKC", char)
    return next((escape for bracket, escape in _ESCAPES.items() if bracket in folded), None)


def _escape_line(line: str) -> str:
    if not _MARKERISH.search(re.sub(r"\s", "", fold(line))):
        return line
    return "".join(_bracket(char) or char for char in line)


def escape(text: str) -> str:
    """``text`` with every line that could be read as a marker defused (its brackets made ``‹``/``›``); other
    lines are kept as they are."""
    return "\n".join(_escape_line(line) for line in text.split("\n"))


def nonce(parts: Mapping[str, str]) -> str:
    """The request's nonce: a hash of every part it fences, with their labels."""
    content = json.dumps(sorted(parts.items()), ensure_ascii=False)
    return hashlib.sha256(content.encode("utf-8")).hexdigest()[:NONCE_CHARS]


def opener(label: str, key: str) -> str:
    return f"<<<{label} {key}>>>"


def closer(label: str, key: str) -> str:
    return f"<<</{label} {key}>>>"


def fence_parts(parts: Mapping[str, str]) -> dict[str, str]:
    """Each part (label -> text) escaped and between its markers, every marker carrying the request's nonce."""
    key = nonce(parts)
    return {label: f"{opener(label, key)}\n{escape(text)}\n{closer(label, key)}" for label, text in parts.items()}
