"""Score (reference, response) pairs: BLEU-1..4, ROUGE-1, ROUGE-L, SS and S, all on 0-100.

S = (BLEU-1 + BLEU-2 + BLEU-3 + BLEU-4 + ROUGE-1 + ROUGE-L + SS) / 7, as the paper's Eq. 2.

An empty answer scores 0 on every metric (``scoring.empty_answers: zero``), or is not scored (``skip``, as the
upstream scorer): its metrics are then None, it is flagged ``skipped``, and the summary counts it as missing.

Work is shared, not repeated: every distinct text is tokenised once and embedded once (in batches, through
the on-disk cache), so references embedded for one model are reused by every later model.
"""

from __future__ import annotations

import logging
import platform
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from h2htalk.scoring.bootstrap import bootstrap_mean_ci
from h2htalk.scoring.cache import EmbeddingCache, embed_with_cache
from h2htalk.scoring.embedders import Embedder
from h2htalk.scoring.lexical import BLEU_WEIGHTS, SMOOTHING, bleu_1_to_4, rouge_1_l
from h2htalk.scoring.tokenizers import Tokenizer
from h2htalk.settings import BootstrapSettings
from h2htalk.versions import package_version

log = logging.getLogger(__name__)

METRICS: tuple[str, ...] = ("bleu1", "bleu2", "bleu3", "bleu4", "rouge1", "rougeL", "ss")
COLUMNS: tuple[str, ...] = (*METRICS, "S")
SKIPPED = "skipped"  # the flag of an empty answer left unscored (scoring.empty_answers: skip)


@dataclass(frozen=True)
class Pair:
    id: str
    reference: str
    response: str


def signature(tokenizer: Tokenizer, embedder: Embedder, rouge_measure: str, empty_answers: str) -> dict[str, Any]:
    """Everything a score depends on besides the texts, recorded with every score row."""
    return {
        "tokenizer": tokenizer.describe(),
        "bleu": f"nltk-{package_version('nltk')} sentence_bleu",
        "smoothing": SMOOTHING,
        "weights": [list(w) for w in BLEU_WEIGHTS],
        "rouge": f"rouge-score-{package_version('rouge-score')} {'fmeasure' if rouge_measure == 'f' else 'recall'}",
        "lcs": f"rapidfuzz-{package_version('rapidfuzz')} LCSseq",
        "embedder": embedder.describe(),
        "embedder_key": embedder.key,
        "S": "mean(bleu1..4, rouge1, rougeL, ss) x 100",
        "empty_answers": empty_answers,
        "numpy": np.__version__,
        "python": platform.python_version(),
    }


def score_pairs(
    pairs: Sequence[Pair],
    tokenizer: Tokenizer,
    embedder: Embedder,
    cache: EmbeddingCache | None,
    rouge_measure: str,
    empty_answers: str,
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Per-item scores (0-100) and counts of the work done.

    An empty response is flagged ``empty_response`` and, by ``empty_answers``, scores 0 on every metric (zero;
    SS too: an empty answer carries no meaning) or gets None for every metric and the flag ``skipped`` (skip);
    it never raises. An empty reference scores 0 either way (the curated references hold none).
    """
    texts = [p.reference for p in pairs] + [p.response for p in pairs if p.response.strip()]
    distinct = list(dict.fromkeys(texts))
    tokens = {text: tokenizer.tokenize(text) for text in distinct}
    vectors, embedded = embed_with_cache(distinct, embedder, cache)

    items = []
    for pair in pairs:
        flags = []
        if not pair.response.strip():
            flags.append("empty_response")
        if not pair.reference.strip():
            flags.append("empty_reference")
        if flags == ["empty_response"] and empty_answers == "skip":
            items.append({"id": pair.id, **dict.fromkeys(COLUMNS), "flags": [*flags, SKIPPED]})
            continue
        if flags:
            values = dict.fromkeys(METRICS, 0.0)
        else:
            ref, hyp = tokens[pair.reference], tokens[pair.response]
            b1, b2, b3, b4 = bleu_1_to_4(ref, hyp)
            r1, rl = rouge_1_l(ref, hyp, rouge_measure)
            cosine = float(np.dot(vectors[pair.reference], vectors[pair.response]))
            values = {"bleu1": b1, "bleu2": b2, "bleu3": b3, "bleu4": b4, "rouge1": r1, "rougeL": rl}
            values["ss"] = min(1.0, max(-1.0, cosine))
        scaled = {name: 100.0 * value for name, value in values.items()}
        scaled["S"] = sum(scaled[m] for m in METRICS) / len(METRICS)
        items.append({"id": pair.id, **scaled, "flags": flags})
    work = {"pairs": len(pairs), "distinct_texts": len(distinct), "embedded": embedded}
    log.info("scored %d pairs: %d distinct texts, %d embedded now", len(pairs), len(distinct), embedded)
    return items, work


def cell_value(value: float | None, low: float | None, high: float | None) -> dict[str, float | None]:
    """What every summary (S or J) reports as its cell's value, with the CI, whatever its ``measure``."""
    return {"value": value, "value_ci_low": low, "value_ci_high": high}


def summarise(
    items: Sequence[dict[str, Any]], bootstrap: BootstrapSettings, groups: Sequence[str] | None = None
) -> dict[str, Any]:
    """Mean of every column with a seeded bootstrap CI (the same resamples for every column), over the scored
    items: ``n`` counts them, ``missing`` the skipped empty answers. With ``groups`` (one label per item: the
    conversation it belongs to, ``h2htalk.data.conversations``), whole groups are resampled, and ``clusters``
    says how many the scored items fall into (None: every item drawn on its own)."""
    scored = [item for item in items if item["S"] is not None]
    kept = None if groups is None else [g for item, g in zip(items, groups, strict=True) if item["S"] is not None]
    values = np.array([[item[c] for c in COLUMNS] for item in scored], dtype=np.float64).reshape(-1, len(COLUMNS))
    low, high = bootstrap_mean_ci(values, bootstrap.resamples, bootstrap.seed, bootstrap.confidence, kept)
    means = values.mean(axis=0) if len(scored) else np.full(len(COLUMNS), np.nan)
    summary: dict[str, Any] = {"n": len(scored), "missing": len(items) - len(scored)}
    for index, column in enumerate(COLUMNS):
        summary[column] = float(means[index])
        summary[f"{column}_ci_low"] = float(low[index])
        summary[f"{column}_ci_high"] = float(high[index])
    summary["clusters"] = None if kept is None else len(set(kept))
    summary["flagged"] = {
        flag: sum(flag in item["flags"] for item in items) for flag in ("empty_response", "empty_reference", SKIPPED)
    }
    summary["bootstrap"] = vars(bootstrap)
    return summary
