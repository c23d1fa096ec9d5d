"""Tokenisers for the lexical metrics: jieba words (the upstream scorer's choice) or characters.

Punctuation is a token; whitespace is not, unless ``keep_whitespace`` (upstream's ``list(jieba.cut(text))``
keeps runs of spaces as tokens, which moves BLEU on answers with spaces). rouge-score's default tokenizer
deletes every non-ASCII character, so Chinese would score 0 (or 100 for any two texts sharing their ASCII
part): always pass one of these.
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

    def __init__(self, keep_whitespace: bool = False) -> None:
        import jieba

        jieba.setLogLevel(60)
        # a tokenizer of its own, with jieba's default dictionary only: words another part of the process adds to
        # jieba's shared tokenizer (the curation's persona names, say) never change a score
        tokenizer = jieba.Tokenizer()
        tokenizer.initialize()
        self._cut = tokenizer.lcut
        self.keep_whitespace = keep_whitespace

    def tokenize(self, text: str) -> list[str]:
        return [token for token in self._cut(text) if self.keep_whitespace or not token.isspace()]

    def describe(self) -> str:
        return f"jieba-{version('jieba')}" + ("+whitespace" if self.keep_whitespace else "")


class CharTokenizer:
    name = "char"

    def __init__(self, keep_whitespace: bool = False) -> None:
        self.keep_whitespace = keep_whitespace

    def tokenize(self, text: str) -> list[str]:
        return [ch for ch in text if self.keep_whitespace or not ch.isspace()]

    def describe(self) -> str:
        return "char" + ("+whitespace" if self.keep_whitespace else "")


TOKENIZERS = {"jieba": JiebaTokenizer, "char": CharTokenizer}


@cache
def get_tokenizer(name: str, keep_whitespace: bool = False) -> Tokenizer:
    try:
        return TOKENIZERS[name](keep_whitespace)
    except KeyError:
        raise ValueError(f"unknown tokenizer {name!r}; known: {', '.join(TOKENIZERS)}") from None
