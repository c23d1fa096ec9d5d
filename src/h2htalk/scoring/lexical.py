"""BLEU-1..4 (nltk sentence BLEU, one reference, smoothing method1) and ROUGE-1/ROUGE-L, F-measure or recall.

The paper's text says ROUGE recall; the upstream scorer computes the F-measure. F is the default
(``scoring.rouge_measure``), and the choice is part of every score's signature.

ROUGE-L is rouge-score's definition (precision = LCS / hypothesis length, recall = LCS / reference length,
``rouge_score.scoring.fmeasure``); the LCS length comes from rapidfuzz's bit-parallel LCS, because rouge-score
fills an O(n*m) table in pure Python, which was the largest cost of scoring. Both give the same length
(tested against rouge-score).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu
from rapidfuzz.distance import LCSseq
from rouge_score import rouge_scorer, scoring

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


_ROUGE_1 = rouge_scorer.RougeScorer(["rouge1"], use_stemmer=False, tokenizer=_PreTokenized())


def bleu_1_to_4(reference: Sequence[str], hypothesis: Sequence[str]) -> tuple[float, float, float, float]:
    """BLEU-1..4 in [0, 1]; an empty side scores 0 (nltk would warn and return 0 too)."""
    if not reference or not hypothesis:
        return (0.0, 0.0, 0.0, 0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nltk warns about zero n-gram overlaps; smoothing handles them
        scores = sentence_bleu([list(reference)], list(hypothesis), weights=BLEU_WEIGHTS, smoothing_function=_SMOOTH)
    return tuple(float(s) for s in scores)  # type: ignore[return-value]


ROUGE_MEASURES = ("f", "recall")


def rouge_1_l(reference: Sequence[str], hypothesis: Sequence[str], measure: str = "f") -> tuple[float, float]:
    """ROUGE-1 and ROUGE-L in [0, 1] over the given tokens: F-measure (``f``) or ``recall``."""
    if not reference or not hypothesis:
        return (0.0, 0.0)
    rouge1 = _ROUGE_1.score(reference, hypothesis)["rouge1"]  # type: ignore[arg-type]
    lcs = lcs_length(reference, hypothesis)
    if measure == "recall":
        return float(rouge1.recall), lcs / len(reference)
    if measure != "f":
        raise ValueError(f"unknown ROUGE measure {measure!r}; known: {', '.join(ROUGE_MEASURES)}")
    return float(rouge1.fmeasure), float(scoring.fmeasure(lcs / len(hypothesis), lcs / len(reference)))


def lcs_length(reference: Sequence[str], hypothesis: Sequence[str]) -> int:
    """Length of the longest common token subsequence."""
    ids: dict[str, int] = {}  # tokens become small integers: exact equality, no reliance on string hashes
    ref = [ids.setdefault(token, len(ids)) for token in reference]
    hyp = [ids.setdefault(token, len(ids)) for token in hypothesis]
    return int(LCSseq.similarity(ref, hyp))
