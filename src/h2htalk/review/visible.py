"""Invisible characters made visible: a bidi override (U+202E) in a model's answer would reverse the rest of it on
the page, and a zero-width space or a stray control character would hide what is there, silently. Every format
(Cf) and control (Cc) character except the tab and the line break (a line feed, or a carriage return before one)
is shown as a token such as 〚U+202E〛, never applied. The results viewer marks the same characters in its script
(resources/viewer/viewer.js)."""

from __future__ import annotations

import json
import re
import sys
import unicodedata

KEPT = "\t\n\r"  # a carriage return is kept only before a line feed


def _invisible_class() -> str:
    """A regular expression's character class of every Cf and Cc character but those KEPT."""
    found = [
        chr(code)
        for code in range(sys.maxunicode + 1)
        if unicodedata.category(chr(code)) in ("Cf", "Cc") and chr(code) not in KEPT
    ]
    return "[" + "".join(re.escape(ch) for ch in found) + "]"


INVISIBLE = re.compile(_invisible_class() + "|\r(?!\n)")


def mark(character: str) -> str:
    return f"〚U+{ord(character):04X}〛"


def visible(text: str) -> str:
    """``text`` with each invisible character replaced by its visible token."""
    return INVISIBLE.sub(lambda found: mark(found[0]), text)


def json_escaped(text: str) -> str:
    """JSON text (as ``json.dumps`` writes it) with each invisible character as its \\u escape: the same JSON,
    readable, and left as it is by ``visible``."""
    return INVISIBLE.sub(lambda found: json.dumps(found[0])[1:-1], text)
