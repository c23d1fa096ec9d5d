"""Find personal identifiers and replace or flag them, counting each type.

Structured identifiers (phone numbers, e-mail addresses, mainland ID-card numbers, URLs) are found
with patterns; an ID-card candidate must also pass the GB 11643 checksum. Personal names are found
with jieba's part-of-speech tagger (tags ``nr``, ``nrfg``, ``nrt``), keeping only tokens of two or
more characters that are rare in jieba's dictionary: its dictionary tags many common words as names
(阳光, 温馨, 安静 ...), so a frequency cap is what separates names from vocabulary. The companion
persona's own names are never identifiers. Name detection is a heuristic with imperfect precision,
which is why the default mode for names is ``flag`` (count, text unchanged) rather than ``replace``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

PII_TYPES: tuple[str, ...] = ("id_card", "email", "url", "phone", "person_name")
PLACEHOLDERS: dict[str, str] = {
    "id_card": "[ID]",
    "email": "[EMAIL]",
    "url": "[URL]",
    "phone": "[PHONE]",
    "person_name": "[NAME]",
}
NAME_TAGS = frozenset({"nr", "nrfg", "nrt"})
NAME_MAX_DICT_FREQ = 10

_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_ID_CHECK = "10X98765432"

PATTERNS: dict[str, re.Pattern[str]] = {
    "id_card": re.compile(
        r"(?<![0-9A-Za-z])[1-9]\d{5}(?:18|19|20)\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])\d{3}[\dXx]"
        r"(?![0-9A-Za-z])"
    ),
    "email": re.compile(r"(?<![\w.+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"),
    "url": re.compile(r"(?:https?://|www\.)[A-Za-z0-9\-._~:/?#\[\]@!$&'*+,;=%]+", re.IGNORECASE),
    "phone": re.compile(
        r"(?<![\d+])(?:"
        r"(?:\+?86[-\s]?)?1[3-9]\d(?:[-\s]?\d{4}){2}"  # mainland mobile
        r"|0\d{2,3}-\d{7,8}"  # mainland landline with area code
        r"|\+\d{1,3}[-\s]\d{2,4}(?:[-\s]\d{3,4}){1,3}"  # international with separators
        r")(?!\d)"
    ),
}


def id_card_checksum_ok(number: str) -> bool:
    total = sum(int(d) * w for d, w in zip(number[:17], _ID_WEIGHTS, strict=True))
    return _ID_CHECK[total % 11] == number[17].upper()


@dataclass
class Anonymised:
    text: str
    counts: Counter[str] = field(default_factory=Counter)


NameFinder = Callable[[str], list[str]]


def jieba_name_finder(persona_names: Iterable[str]) -> NameFinder:
    """Return a function listing the personal-name tokens jieba finds in a text, persona excluded."""
    import jieba
    from jieba.posseg import POSTokenizer

    jieba.setLogLevel(60)
    persona = set(persona_names)
    # a tokenizer of its own: names added to jieba's shared one would change how every later text of the process
    # is cut, the scores' BLEU and ROUGE tokens among them
    tokenizer = jieba.Tokenizer()
    for name in persona:  # keep the persona's names whole so they are recognised and skipped
        tokenizer.add_word(name, freq=100000, tag="nr")
    tagger, freq = POSTokenizer(tokenizer), tokenizer.FREQ

    def find(text: str) -> list[str]:
        names = []
        for pair in tagger.cut(text):
            word, tag = pair.word, pair.flag
            if tag not in NAME_TAGS or len(word) < 2 or word in persona:
                continue
            if any(part in word for part in persona):
                continue
            if (freq.get(word) or 0) > NAME_MAX_DICT_FREQ:
                continue
            names.append(word)
        return names

    return find


def anonymise(text: str, modes: Mapping[str, str], name_finder: NameFinder | None = None) -> Anonymised:
    """Apply each identifier type's mode (``replace``, ``flag`` or ``ignore``) to ``text``."""
    result = Anonymised(text)
    for kind in ("id_card", "email", "url", "phone"):
        mode = modes.get(kind, "ignore")
        if mode == "ignore":
            continue
        pattern = PATTERNS[kind]
        matches = [m for m in pattern.finditer(result.text) if kind != "id_card" or id_card_checksum_ok(m[0])]
        if not matches:
            continue
        result.counts[kind] += len(matches)
        if mode == "replace":
            result.text = _replace_spans(result.text, [(m.start(), m.end()) for m in matches], PLACEHOLDERS[kind])
    mode = modes.get("person_name", "ignore")
    if mode != "ignore" and name_finder is not None:
        names = name_finder(result.text)
        if names:
            result.counts["person_name"] += len(names)
            if mode == "replace":
                for name in sorted(set(names), key=len, reverse=True):
                    result.text = result.text.replace(name, PLACEHOLDERS["person_name"])
    return result


def _replace_spans(text: str, spans: list[tuple[int, int]], placeholder: str) -> str:
    for start, end in sorted(spans, reverse=True):
        text = text[:start] + placeholder + text[end:]
    return text
