"""Tokenisers for the lexical metrics: jieba words (the upstream scorer's choice) or characters.

Whitespace is never a token; punctuation is. rouge-score's default tokenizer deletes every non-ASCII
character, so Chinese would score 0 (or 100 for any two texts sharing their ASCII part): always pass one
of these.
"""

from __future__ import annotations

from functools import cache
from importlib.metadata import version
from typing import Protocol


class Tokenizer(Protocol):
    name: str

    def tokenize(self, text: str) -> list[str]: ...

    def describe(self) -> str: ...


class JiebaTokenizer:
    name = "jieba"

    def __init__(self) -> None:
        import jieba

        jieba.setLogLevel(60)
        jieba.initialize()
        self._cut = jieba.lcut

    def tokenize(self, text: str) -> list[str]:
        return [token for token in self._cut(text) if not token.isspace()]

    def describe(self) -> str:
        return f"jieba-{version('jieba')}"


class CharTokenizer:
    name = "char"

    def tokenize(self, text: str) -> list[str]:
        return [ch for ch in text if not ch.isspace()]

    def describe(self) -> str:
        return "char"


TOKENIZERS = {"jieba": JiebaTokenizer, "char": CharTokenizer}


@cache
def get_tokenizer(name: str) -> Tokenizer:
    try:
        return TOKENIZERS[name]()
    except KeyError:
        raise ValueError(f"unknown tokenizer {name!r}; known: {', '.join(TOKENIZERS)}") from None
