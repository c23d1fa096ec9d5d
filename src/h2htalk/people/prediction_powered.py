"""A cell mean from the judge on every item, corrected by people on a random sample (prediction-powered
inference; Angelopoulos et al., Science 2023).

With the judge's value g on all N items of a cell and people's value y on a random sample of n of them, the
estimate is

    mean(g over the N items) + mean(y - g over the n sampled items)

which is unbiased for the people's mean whatever the judge's bias, as long as the sample is random. Its
variance, with the items a random draw from the items the cell could have had (as the bootstrap of every
other cell assumes) and the sample a subset of those N items:

    se^2 = var(g) / N + var(y - g) / n + 2 cov(g, y - g) / N

(the last term because the judge's mean and the correction share the sampled items; at n = N it reduces to
var(y) / N, the people-only variance). The interval is the normal one at the configured confidence. A judge
close to people makes var(y - g) small and the interval narrow; a useless judge makes it no better than
people alone on n items. Power tuning (PPI++) is not used: the correction is the plain difference.

Which items are sampled follows from a seed, the cell and the item ids alone: each item's place in the order is
a hash, so the sample does not move when another cell, or the judge's verdict on an item outside it, changes.
Every item of the cell is equally likely (no strata within a cell: the judge's score already carries what
strata on it would).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from h2htalk.layout import Cell


@dataclass(frozen=True)
class Estimate:
    value: float
    ci_low: float
    ci_high: float
    se: float
    items: int  # N: items with the judge's value
    rated: int  # n: sampled items with people's value
    correction: float  # the mean of y - g over the sample


def prediction_powered_mean(
    predicted: np.ndarray, sample: np.ndarray, observed: np.ndarray, confidence: float
) -> Estimate:
    """The people's mean from the judge's values ``predicted`` (every item), the indices ``sample`` of the
    items people rated, and their values ``observed`` (on the same scale, in the order of ``sample``)."""
    g = np.asarray(predicted, dtype=np.float64)
    index = np.asarray(sample, dtype=np.intp)
    y = np.asarray(observed, dtype=np.float64)
    big_n, n = g.size, index.size
    if n < 2 or big_n < n or y.size != n:
        raise ValueError(f"need at least 2 rated items within the {big_n} predicted ones (got {n}, {y.size} values)")
    difference = y - g[index]
    value = float(g.mean() + difference.mean())
    covariance = float(np.cov(g[index], difference, ddof=1)[0, 1])
    variance = g.var(ddof=1) / big_n + difference.var(ddof=1) / n + 2.0 * covariance / big_n
    se = float(np.sqrt(max(variance, 0.0)))
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    return Estimate(value, value - z * se, value + z * se, se, big_n, n, float(difference.mean()))


def sample_order(cell: Cell, ids: Iterable[str], seed: int) -> list[str]:
    """The item ids of ``cell`` in the seeded order of the sample: the first k are its sample of k."""

    def key(item_id: str) -> str:
        text = f"{seed}\0{cell.model}\0{cell.variant}\0{cell.task}\0{item_id}"
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    return sorted(ids, key=key)


def review_sample(cell: Cell, ids: Iterable[str], size: int, seed: int) -> list[str]:
    """The ``size`` items of ``cell`` (all of them when it has fewer) that people rate in sample mode."""
    return sample_order(cell, ids, seed)[:size]
