"""Rule-based screens of reference texts: release defects and the safety lexicon.

The rules live in documented resource files (``resources/curation/``) so that what gets flagged is
reviewable without reading code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import yaml

QUALITY_FLAGS: tuple[str, ...] = ("filler", "meta_refusal", "leftover_instruction")


def _load_resource(name: str) -> dict:
    text = resources.files("h2htalk.resources").joinpath("curation").joinpath(name).read_text(encoding="utf-8")
    return yaml.safe_load(text)


@dataclass(frozen=True)
class QualityRules:
    filler: frozenset[str]
    meta_refusal: tuple[re.Pattern[str], ...]
    leftover_instruction: tuple[re.Pattern[str], ...]

    def flags(self, text: str) -> list[str]:
        found = []
        if text in self.filler:
            found.append("filler")
        if any(p.search(text) for p in self.meta_refusal):
            found.append("meta_refusal")
        if any(p.search(text) for p in self.leftover_instruction):
            found.append("leftover_instruction")
        return found


@lru_cache(maxsize=1)
def load_quality_rules() -> QualityRules:
    raw = _load_resource("quality_rules.yaml")
    return QualityRules(
        filler=frozenset(raw["filler"]),
        meta_refusal=tuple(re.compile(p) for p in raw["meta_refusal"]),
        leftover_instruction=tuple(re.compile(p) for p in raw["leftover_instruction"]),
    )


_SEP = "\x1f"


def _joined_tokens(text: str) -> str:
    import jieba

    jieba.setLogLevel(60)
    return _SEP + _SEP.join(t for t in jieba.lcut(text) if t.strip()) + _SEP


@dataclass(frozen=True)
class SafetyLexicon:
    """Terms per category, matched as whole jieba tokens (or runs of tokens), not as raw substrings.

    Chinese has no spaces, so a raw substring test flags innocent text: 色情 in 蓝色情侣装
    (blue couple outfits), 台独 in 窗台独赏 (alone at the window sill).
    """

    terms: dict[str, tuple[str, ...]]  # category -> terms
    token_terms: dict[str, tuple[str, ...]]  # category -> terms as separator-joined token runs

    @classmethod
    def from_terms(cls, terms: dict[str, list[str]]) -> SafetyLexicon:
        return cls(
            terms={cat: tuple(ts) for cat, ts in terms.items()},
            token_terms={cat: tuple(_joined_tokens(t) for t in ts) for cat, ts in terms.items()},
        )

    def categories(self, text: str) -> list[str]:
        if not any(term in text for terms in self.terms.values() for term in terms):
            return []  # cheap pre-check: no term occurs even as a substring
        tokens = _joined_tokens(text)
        return [cat for cat, runs in self.token_terms.items() if any(run in tokens for run in runs)]


@lru_cache(maxsize=1)
def load_safety_lexicon() -> SafetyLexicon:
    return SafetyLexicon.from_terms(_load_resource("safety_lexicon.yaml"))
