"""A cell mean from the judge on every item, corrected by people on a random sample (prediction-powered
inference; Angelopoulos et al., Science 2023). The same estimator corrects a cheap judge with a sample of a strong
one (``rubric_judge.mode: cascade``): whatever rates the sample is "people" below.

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

The estimate is also the mean of one pseudo-value per item (``pseudo_values``),

    z_i = g_i + mean(d) + c (N / n) [i sampled] (d_i - mean(d)),   d = y - g on the sample, c = sqrt(n / (n - 1)),

whose variance over the N items, divided by N, is the se^2 above up to terms of order 1/N^2. Two uses follow:
items that are not independent (a conversation's turns: ``clusters``) get the variance of the mean of z over
whole clusters; and a comparison of two cells on the items both answered is the mean of their pseudo-values'
differences, each cell's own sample taken into account (Table 2's paired comparisons). A second phase nests the
same way: where people rate a random part of a strong judge's sample, the strong judge's pseudo-values of its
sample, corrected by people, are the ``observed`` of the first phase.

Which items are sampled follows from a seed, the cell and the item ids alone: each item's place in the order is
a hash, so the sample does not move when another cell, or the judge's verdict on an item outside it, changes.
Every item of the cell is equally likely (no strata within a cell: the judge's score already carries what
strata on it would).
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, replace
from statistics import NormalDist

import numpy as np

from h2htalk.layout import Cell
from h2htalk.scoring.bootstrap import cluster_index


@dataclass(frozen=True)
class Estimate:
    value: float
    ci_low: float
    ci_high: float
    se: float
    items: int  # N: items with the judge's value
    rated: int  # n: sampled items with people's value
    correction: float  # the mean of y - g over the sample (the rectifier)
    correction_se: float  # its standard error, sd(y - g) / sqrt(n)

    def within(self, low: float, high: float) -> Estimate:
        """The estimate and its interval kept to the scale [low, high]: a corrected mean of values on a bounded
        scale can leave it (a small sample's correction, or an interval wider than the scale), and a rate below 0
        or an interval past 100 says nothing the bound does not; the interval's coverage only grows."""

        def kept(x: float) -> float:
            return min(high, max(low, x))

        # each bound kept on its own: an interval wholly past one end becomes that end, never inverted
        return replace(self, value=kept(self.value), ci_low=kept(self.ci_low), ci_high=kept(self.ci_high))

    def correction_ci(self, confidence: float) -> tuple[float, float]:
        """The rectifier's normal interval at ``confidence``."""
        z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
        return self.correction - z * self.correction_se, self.correction + z * self.correction_se


def _checked(predicted: np.ndarray, sample: np.ndarray, observed: np.ndarray) -> tuple[np.ndarray, ...]:
    g = np.asarray(predicted, dtype=np.float64)
    index = np.asarray(sample, dtype=np.intp)
    y = np.asarray(observed, dtype=np.float64)
    big_n, n = g.size, index.size
    if n < 2 or big_n < n or y.size != n:
        raise ValueError(f"need at least 2 rated items within the {big_n} predicted ones (got {n}, {y.size} values)")
    return g, index, y - g[index]


def prediction_powered_mean(
    predicted: np.ndarray,
    sample: np.ndarray,
    observed: np.ndarray,
    confidence: float,
    clusters: Sequence[Hashable] | None = None,
) -> Estimate:
    """The people's mean from the judge's values ``predicted`` (every item), the indices ``sample`` of the
    items people rated, and their values ``observed`` (on the same scale, in the order of ``sample``); with
    ``clusters`` (one label an item of ``predicted``), the variance is over whole clusters."""
    g, index, difference = _checked(predicted, sample, observed)
    big_n, n = g.size, index.size
    value = float(g.mean() + difference.mean())
    if clusters is None:
        covariance = float(np.cov(g[index], difference, ddof=1)[0, 1])
        variance = g.var(ddof=1) / big_n + difference.var(ddof=1) / n + 2.0 * covariance / big_n
    else:
        variance = _cluster_variance(pseudo_values(g, index, observed), clusters)
    se = float(np.sqrt(max(variance, 0.0)))
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    correction_se = float(difference.std(ddof=1) / np.sqrt(n))
    return Estimate(value, value - z * se, value + z * se, se, big_n, n, float(difference.mean()), correction_se)


def pseudo_values(predicted: np.ndarray, sample: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """One value per predicted item whose mean is the prediction-powered estimate: the judge's value, shifted by
    the mean correction, and on a sampled item its own correction's departure from the mean, weighted N / n."""
    g, index, difference = _checked(predicted, sample, observed)
    n, shift = index.size, difference.mean()
    values = g + shift
    # the departures sum to 0, so any factor keeps the mean; sqrt(n / (n - 1)) makes their spread the sample's
    # variance with n - 1 (the mean correction is estimated from the same n items), as se^2 above has it
    values[index] += (g.size / n) * np.sqrt(n / (n - 1.0)) * (difference - shift)
    return values


def _cluster_variance(values: np.ndarray, clusters: Sequence[Hashable]) -> float:
    """The variance of the mean of ``values`` over whole clusters (m clusters: m / (m - 1) x the sum of each
    cluster's squared residual total, over N^2); with one item a cluster, var(values) / N."""
    index, m = cluster_index(clusters, values.size)
    totals = np.bincount(index, weights=values - values.mean(), minlength=m)
    return float(m / (m - 1) * (totals**2).sum() / values.size**2) if m > 1 else float("nan")


def sample_order(cell: Cell, ids: Iterable[str], seed: int) -> list[str]:
    """The item ids of ``cell`` in the seeded order of the sample: the first k are its sample of k."""

    def key(item_id: str) -> str:
        text = f"{seed}\0{cell.model}\0{cell.variant}\0{cell.task}\0{item_id}"
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    return sorted(ids, key=key)


def review_sample(cell: Cell, ids: Iterable[str], size: int, seed: int) -> list[str]:
    """The ``size`` items of ``cell`` (all of them when it has fewer) that people rate in sample mode."""
    return sample_order(cell, ids, seed)[:size]
