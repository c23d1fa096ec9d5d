"""The numbers behind Figures 4-6: word frequencies, verb-noun pairs and length distributions.

Tokens are jieba words throughout. Verb-noun pairs come from a Chinese spaCy pipeline's dependency parse
(a verb and its direct object) when one is installed, and from jieba's part-of-speech tags otherwise (a verb
followed, within a short window that may hold particles, numerals and measure words, by a noun); every
output says which method made it.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Iterable
from functools import cache
from importlib import resources
from typing import Any

_WORDLIKE = re.compile(r"[\u4e00-\u9fffA-Za-z]")
# Scaffolding of the references' own layout, removed before counting (not before measuring lengths): the
# synthesis format's labels and its no-memory sentence, and the Level II "omniscient view" note header.
LAYOUT = re.compile(r"未提取到关键信息。?|记忆(?:内容|类别|重要性)\s*[:：]|全知视角(?:补充)?\s*[:：]")
VERB_TAGS = frozenset({"v", "vd"})
NOUN_TAGS = frozenset({"n", "nz", "nw", "ng", "vn", "nr", "ns", "nt"})
SKIP_TAGS = frozenset({"u", "ul", "uz", "ug", "uj", "uv", "ud", "m", "q", "mq", "a", "ad", "d"})
WINDOW = 3
JIEBA_METHOD = (
    "jieba part-of-speech tags (no Chinese spaCy model installed): a verb (v) followed within 3 tokens by a"
    " noun (n*, two or more characters), skipping particles, numerals, measure words and adverbs"
)
SPACY_METHOD = "spaCy {model} dependency parse: verbs and their direct objects (dobj)"


@cache
def stopwords() -> frozenset[str]:
    text = resources.files("h2htalk.resources").joinpath("figures").joinpath("stopwords_zh.txt").read_text("utf-8")
    return frozenset(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#"))


@cache
def _jieba() -> Any:
    """A jieba tokenizer of the figures' own, with their user dictionary (a few food and activity words it splits
    apart); jieba's shared tokenizer, which scoring uses, stays as it is."""
    import jieba

    jieba.setLogLevel(60)
    tokenizer = jieba.Tokenizer()
    path = resources.files("h2htalk.resources").joinpath("figures").joinpath("userdict.txt")
    with resources.as_file(path) as userdict:
        tokenizer.load_userdict(str(userdict))
    return tokenizer


@cache
def _tagger() -> Any:
    from jieba.posseg import POSTokenizer

    return POSTokenizer(_jieba())


def strip_layout(text: str) -> str:
    return LAYOUT.sub(" ", text)


def _cut(text: str) -> list[str]:
    return [t for t in _jieba().lcut(text) if t.strip()]


def word_frequencies(texts: Iterable[str], stop: frozenset[str] | None = None) -> Counter[str]:
    """Counts of content words: two or more characters, at least one letter or Han character, no stop word."""
    stop = stopwords() if stop is None else stop
    counts: Counter[str] = Counter()
    for text in texts:
        words = _cut(strip_layout(text))
        counts.update(t for t in words if len(t) >= 2 and _WORDLIKE.search(t) and t not in stop)
    return counts


def _pairs_jieba(texts: Iterable[str], stop: frozenset[str]) -> Counter[tuple[str, str]]:
    counts: Counter[tuple[str, str]] = Counter()
    for text in texts:
        tokens = [(p.word, p.flag) for p in _tagger().cut(strip_layout(text)) if p.word.strip()]
        for index, (word, flag) in enumerate(tokens):
            if flag not in VERB_TAGS or word in stop:
                continue
            for other, other_flag in tokens[index + 1 : index + 1 + WINDOW]:
                if other_flag in NOUN_TAGS:
                    if other not in stop and len(other) >= 2:  # one-character "nouns" are mostly split words
                        counts[(word, other)] += 1
                    break
                if other_flag not in SKIP_TAGS:
                    break
    return counts


def _spacy_model() -> Any | None:
    try:
        import spacy
    except ImportError:
        return None
    for name in ("zh_core_web_trf", "zh_core_web_lg", "zh_core_web_md", "zh_core_web_sm"):
        try:
            return spacy.load(name)
        except OSError:
            continue
    return None


def _pairs_spacy(nlp: Any, texts: Iterable[str], stop: frozenset[str]) -> Counter[tuple[str, str]]:
    counts: Counter[tuple[str, str]] = Counter()
    for doc in nlp.pipe(strip_layout(t) for t in texts):
        for token in doc:
            is_object = token.dep_ == "dobj" and token.head.pos_ == "VERB" and token.pos_ in ("NOUN", "PROPN")
            if is_object and token.head.text not in stop and token.text not in stop:
                counts[(token.head.text, token.text)] += 1
    return counts


def verb_noun_pairs(texts: list[str], prefer_spacy: bool = True) -> tuple[Counter[tuple[str, str]], str]:
    """(pair counts, method description)."""
    stop = stopwords()
    nlp = _spacy_model() if prefer_spacy else None
    if nlp is not None:
        return _pairs_spacy(nlp, texts, stop), SPACY_METHOD.format(model=nlp.meta.get("name", "zh"))
    return _pairs_jieba(texts, stop), JIEBA_METHOD


def token_lengths(texts: Iterable[str]) -> list[int]:
    return [len(_cut(text)) for text in texts]


def describe_lengths(lengths: list[int]) -> dict[str, float]:
    if not lengths:
        return {"n": 0, "mean": float("nan"), "median": float("nan"), "min": 0, "max": 0}
    return {
        "n": len(lengths),
        "mean": statistics.fmean(lengths),
        "median": float(statistics.median(lengths)),
        "min": min(lengths),
        "max": max(lengths),
    }
