"""How two texts are compared for a copy: each normalised to the characters a copy is made of, and cut into
character n-grams.

Folding (``fold``) reads a text as a reader that ignores width and invisible characters sees it: NFKC (full-width
letters and digits read as ASCII) with every default-ignorable code point, format character and combining mark
removed; the judges' fences compare their lines with a marker this way. Normalising folds, folds traditional
characters to simplified (OpenCC's t2s) and keeps only letters and digits, so that spacing, punctuation,
brackets and invisible characters cannot hide a copy. What is *said* in a text leaves its bracketed actions out
(（放下咖啡杯）: done, not said). The leak check of the instances (``h2htalk.instances.leaks``) and the conversation
clusters of the data (``h2htalk.data.conversations``) read texts this way.
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache

import opencc

KEPT_CATEGORIES = frozenset("LN")  # letters and numbers: the characters a copy is made of
ASIDE = re.compile(r"[（(][^（）()]*[）)]")  # a bracketed action or expression: done, not said


# Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt, 15.1), which Python's unicodedata lacks; the
# last range holds the tag characters (U+E0000-E007F)
_IGNORABLE_RANGES = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x180B, 0x180F),
    (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF),
)  # fmt: skip
_IGNORABLE = frozenset(code for first, last in _IGNORABLE_RANGES for code in range(first, last + 1))


def unseen(char: str) -> bool:
    """Whether a reader sees nothing of ``char``: a default-ignorable code point, a format character or a
    combining mark (a mark changes the letter it sits on, not which letter it is)."""
    return ord(char) in _IGNORABLE or unicodedata.category(char) in ("Cf", "Mn", "Mc", "Me")


class _Unseen(dict[int, int | None]):
    """``str.translate``'s table that drops every ``unseen`` character: each code point looked up once."""

    def __missing__(self, code: int) -> int | None:
        self[code] = None if unseen(chr(code)) else code
        return self[code]


_DROP_UNSEEN = _Unseen()


def fold(text: str) -> str:
    """``text`` as a reader that ignores width and invisible characters sees it: decomposed (NFKD, so that a mark
    composed into a letter, ``≮``, comes apart from it), every ``unseen`` character removed, then NFKC."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKD", text).translate(_DROP_UNSEEN))


@cache
def _to_simplified() -> opencc.OpenCC:
    return opencc.OpenCC("t2s")


def normalise(text: str) -> str:
    """Folded (``fold``: NFKC, invisible characters and marks removed), traditional folded to simplified, and
    only letters and digits kept."""
    simplified = _to_simplified().convert(fold(text))
    return "".join(c for c in simplified if unicodedata.category(c)[0] in KEPT_CATEGORIES)


def said(text: str) -> str:
    """What ``text`` says, normalised: its bracketed actions left out."""
    return normalise(ASIDE.sub("", text))


def ngrams(text: str, n: int) -> set[str]:
    return {text[i : i + n] for i in range(len(text) - n + 1)}
