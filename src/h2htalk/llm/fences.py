"""Fence the material a judge reads, so that nothing in it can pose as a marker of the prompt.

Each fenced part sits between an opening and a closing marker line, ``<<<回答 n>>>`` ... ``<<</回答 n>>>``, whose
``n`` is the request's nonce: a hash of everything the request fences. The nonce is a function of the content,
so the same request has the same messages and the same cache key in every run (the caches stay valid), while a
judged answer cannot name its own request's nonce: it would have to contain the hash of itself.

The nonce is the second wall. The first is the escape: a model reads ``＜<<`` or ``<<\u200b<`` much as it reads
``<<<``, so a line of the material is compared with a marker after folding (``fold``: NFKC, which maps full-width
and small-form brackets to ``<``, with every character a reader does not see removed: default-ignorable code
points such as zero-width spaces and joiners, soft hyphens, bidi marks, variation selectors, the combining
grapheme joiner and the Hangul fillers; combining marks; the tag characters). A line whose folded form, spaces
removed, holds three angle brackets in a row has every character that folds to a bracket replaced by ``‹`` or
``›``, which fold to themselves: no line of the material folds to a marker, whatever nonce it guesses.

The reader of a verdict (``llm.parse``) reads the fence back from the request's messages (``fence_of``): the
nonce tells the closer of this request from one the judged text made up, and the material is what a judge's
reply may repeat from it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from h2htalk.text_match import fold

NONCE_CHARS = 16  # hex digits: 64 bits
_MARKERISH = re.compile(r"<<<|>>>")
_ESCAPES = {"<": "‹", ">": "›"}


def _bracket(char: str) -> str | None:
    folded = fold(char)
    return next((escape for bracket, escape in _ESCAPES.items() if bracket in folded), None)


def marker_like(line: str) -> bool:
    """Whether ``line`` could be read as a marker: its folded form, spaces removed, holds ``<<<`` or ``>>>``."""
    return _MARKERISH.search(re.sub(r"\s", "", fold(line))) is not None


def _escape_line(line: str) -> str:
    if not marker_like(line):
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


@dataclass(frozen=True)
class Fence:
    """What one request fenced: its nonce (``key``; empty when it fenced nothing), the material between its
    markers as the prompt shows it, and the rest of the prompt (``frame``: the instructions, the output format)."""

    key: str
    material: tuple[str, ...]
    frame: str = ""

    def closes(self, line: str) -> bool:
        """Whether ``line`` holds this request's own closing marker (folded, spaces removed)."""
        closing = rf"<<</[^<>\n]{{0,60}}{self.key}>>>"
        return bool(self.key) and re.search(closing, re.sub(r"\s", "", fold(line))) is not None


UNFENCED = Fence("", ())  # a request that fenced nothing: every marker a reply holds is someone else's
_OPENER = re.compile(rf"^<<<([^/<>\n][^<>\n]{{0,59}}) ([0-9a-f]{{{NONCE_CHARS}}})>>>$", re.M)


def fence_of(messages: Iterable[Mapping[str, str]]) -> Fence:
    """The fence of a built request, read back from its messages: no line of the material folds to a marker
    (``escape``), so the marker lines are the request's own. UNFENCED when the messages fence nothing."""
    material: list[str] = []
    frame: list[str] = []
    key = ""
    for message in messages:
        content, position = message["content"], 0
        for found in _OPENER.finditer(content):
            label, key = found.groups()
            end = content.find(f"\n{closer(label, key)}", found.end())
            if end >= 0:
                frame.append(content[position : found.start()])
                material.append(content[found.end() + 1 : end])
                position = end + len(closer(label, key)) + 1
        frame.append(content[position:])
    return Fence(key, tuple(material), "\n".join(frame)) if material else UNFENCED
