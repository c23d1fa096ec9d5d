"""How two texts are compared for a copy: each normalised to the characters a copy is made of, and cut into
character n-grams.

Normalising applies NFKC (full-width letters and digits read as ASCII), folds traditional characters to simplified
(OpenCC's t2s) and keeps only letters, digits and marks, so that spacing, punctuation and brackets cannot hide a
copy. What is *said* in a text leaves its bracketed actions out (（放下咖啡杯）: done, not said). The leak check of
the instances (``h2htalk.instances.leaks``) and the conversation clusters of the data (``h2htalk.data.conversations``)
read texts this way.
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache

import opencc

KEPT_CATEGORIES = frozenset("LNM")  # letters, numbers, marks: the characters a copy is made of
ASIDE = re.compile(r"[（(][^（）()]*[）)]")  # a bracketed action or expression: done, not said


@cache
def _to_simplified() -> opencc.OpenCC:
    return opencc.OpenCC("t2s")


def normalise(text: str) -> str:
    """NFKC, traditional folded to simplified, and only letters, digits and marks kept."""
    simplified = _to_simplified().convert(unicodedata.normalize("NFKC", text))
    return "".join(c for c in simplified if unicodedata.category(c)[0] in KEPT_CATEGORIES)


def said(text: str) -> str:
    """What ``text`` says, normalised: its bracketed actions left out."""
    return normalise(ASIDE.sub("", text))


def ngrams(text: str, n: int) -> set[str]:
    return {text[i : i + n] for i in range(len(text) - n + 1)}
