"""BLEU-1..4 (nltk sentence BLEU, one reference, smoothing method1) and ROUGE-1/ROUGE-L F-measure."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu
from rouge_score import rouge_scorer

BLEU_WEIGHTS: tuple[tuple[float, ...], ...] = (
    (1.0, 0.0, 0.0, 0.0),
    (1 / 2, 1 / 2, 0.0, 0.0),
    (1 / 3, 1 / 3, 1 / 3, 0.0),
    (1 / 4, 1 / 4, 1 / 4, 1 / 4),
)
SMOOTHING = "method1"
_SMOOTH = getattr(SmoothingFunction(), SMOOTHING)


class _PreTokenized:
    """rouge-score calls ``tokenize`` on each text; the texts handed to it are already token lists."""

    @staticmethod
    def tokenize(tokens: Sequence[str]) -> list[str]:  # type: ignore[override]
        return list(tokens)


_ROUGE = rouge_scorer.RougeScorer(["rouge1", "rougeL"], use_stemmer=False, tokenizer=_PreTokenized())


def bleu_1_to_4(reference: Sequence[str], hypothesis: Sequence[str]) -> tuple[float, float, float, float]:
    """BLEU-1..4 in [0, 1]; an empty side scores 0 (nltk would warn and return 0 too)."""
    if not reference or not hypothesis:
        return (0.0, 0.0, 0.0, 0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nltk warns about zero n-gram overlaps; smoothing handles them
        scores = sentence_bleu([list(reference)], list(hypothesis), weights=BLEU_WEIGHTS, smoothing_function=_SMOOTH)
    return tuple(float(s) for s in scores)  # type: ignore[return-value]


def rouge_1_l(reference: Sequence[str], hypothesis: Sequence[str]) -> tuple[float, float]:
    """ROUGE-1 and ROUGE-L F-measure in [0, 1] over the given tokens."""
    if not reference or not hypothesis:
        return (0.0, 0.0)
    scores = _ROUGE.score(reference, hypothesis)  # type: ignore[arg-type]
    return float(scores["rouge1"].fmeasure), float(scores["rougeL"].fmeasure)
