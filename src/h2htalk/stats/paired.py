"""Paired bootstrap comparisons of rows that answered the same items, vectorised over every row and pair.

A *task* is one set of items (a subtask, a study) answered by several rows. Its items are resampled once,
the resamples drawn as every other interval of the project draws them (``h2htalk.scoring.bootstrap``), whole
clusters at a time where items cluster (a conversation's turns). Each resample is a weight per item (how
often it was drawn), so every row's resampled mean and every pair's resampled mean difference is one matrix
product: (rows or pairs x items) @ (items x resamples). A pair is compared on the items both rows answered;
a column that combines tasks with fixed weights (an Avg, Overall) combines their resampled differences
resample by resample, so its interval is consistent with the tasks' own.
"""

from __future__ import annotations

import warnings
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import stdtr

from h2htalk.scoring.bootstrap import Seed, cluster_index, resample_counts


class Resamples:
    """The bootstrap resamples of one task's items, drawn once and shared by every row and pair that answered
    the task: ``weights`` (resamples x items), how often each item is drawn in each resample (its cluster's
    count)."""

    def __init__(self, items: int, resamples: int, seed: Seed, clusters: Sequence[Hashable] | None = None) -> None:
        self.cluster_of, self.clusters = cluster_index(clusters, items)
        self.independent = clusters is None
        counts = np.empty((resamples, self.clusters))
        at = 0
        for chunk in resample_counts(self.clusters, resamples, seed):
            counts[at : at + len(chunk)] = chunk
            at += len(chunk)
        self.weights = counts if self.independent else counts[:, self.cluster_of]


@dataclass(frozen=True)
class Estimates:
    """A statistic of several rows or pairs (NaN where there is nothing to estimate it from)."""

    observed: np.ndarray  # (k,)
    resampled: np.ndarray  # (k, resamples)
    standard_error: np.ndarray  # (k,) analytic: sd / sqrt(n), or over clusters
    bootstrap_variance: np.ndarray  # (k,) of the resampled values, times m / (m - 1) for m clusters
    df: np.ndarray  # (k,) degrees of freedom: m - 1; Welch-Satterthwaite's for a combination
    n: np.ndarray  # (k,) items the estimate rests on

    def take(self, index: Sequence[int]) -> Estimates:
        """The estimates of the rows (pairs) at ``index``."""
        at = np.asarray(index, dtype=np.intp)
        parts = (self.observed, self.resampled, self.standard_error, self.bootstrap_variance, self.df, self.n)
        return Estimates(*(part[at] for part in parts))

    def without(self, dropped: np.ndarray) -> Estimates:
        """These estimates with the ``dropped`` ones (a boolean mask) missing."""
        if not dropped.any():
            return self
        gone = np.where(dropped, np.nan, 1.0)
        return Estimates(
            self.observed * gone, self.resampled * gone[:, None], self.standard_error * gone,
            self.bootstrap_variance * gone, self.df, self.n,
        )  # fmt: skip


def combine(estimates: Sequence[Estimates], coefficients: Sequence[float]) -> Estimates:
    """sum_i c_i * estimate_i, one estimate per task (an Avg: equal weights; Overall: fixed weights). Tasks
    hold different items, so their variances add; a task missing leaves the combination missing."""
    if len(estimates) != len(coefficients) or not estimates:
        raise ValueError("one coefficient per estimate, and at least one estimate")
    if len(estimates) == 1 and coefficients[0] == 1.0:
        return estimates[0]
    terms = list(zip(coefficients, estimates, strict=True))
    resampled = np.zeros_like(estimates[0].resampled)
    for c, e in terms:
        resampled += c * e.resampled
    parts = [c**2 * e.bootstrap_variance for c, e in terms]
    variance = sum(parts)
    with np.errstate(invalid="ignore", divide="ignore"):
        spread = sum(np.where(part > 0, part**2 / e.df, 0.0) for part, (_, e) in zip(parts, terms, strict=True))
        df = np.where(spread > 0, variance**2 / spread, np.inf) + 0.0 * variance  # NaN stays NaN
    return Estimates(
        observed=sum(c * e.observed for c, e in terms),
        resampled=resampled,
        standard_error=np.sqrt(sum(c**2 * e.standard_error**2 for c, e in terms)),
        bootstrap_variance=variance,
        df=df,
        n=sum(e.n for _, e in terms),
    )


def _estimates(values: np.ndarray, present: np.ndarray, resamples: Resamples) -> Estimates:
    """The mean of each row of ``values`` (k x items) over its present items: observed; resampled (one matrix
    product, with one denominator for all where every row has every item); its analytic SE (of a mean of
    independent items sd / sqrt(n); of clustered items, that of a ratio estimator over clusters, the same
    with one item a cluster); and the resampled means' variance."""
    n = present.sum(axis=1).astype(np.float64)
    filled = np.where(present, values, 0.0)
    weights = resamples.weights.T  # (items, resamples), a view: BLAS reads it transposed
    drawn = weights.sum(axis=0)[None, :] if present.all() else present.astype(np.float64) @ weights
    with np.errstate(invalid="ignore", divide="ignore"):
        resampled = (filled @ weights) / drawn
        mean = filled.sum(axis=1) / n
        residual = np.where(present, values - mean[:, None], 0.0)
        if resamples.independent:
            totals, clusters = residual, n
        else:
            totals = np.zeros((len(values), resamples.clusters))
            np.add.at(totals, (slice(None), resamples.cluster_of), residual)
            answered = np.zeros((len(values), resamples.clusters), dtype=bool)
            np.logical_or.at(answered, (slice(None), resamples.cluster_of), present)
            clusters = answered.sum(axis=1).astype(np.float64)
        small_sample = np.where(clusters >= 2, clusters / (clusters - 1.0), np.nan)
        se = np.sqrt(small_sample * (totals**2).sum(axis=1) / n**2)
    if np.isnan(resampled).any():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a row with no item has only NaN resamples
            spread = np.nanvar(resampled, axis=1, ddof=1)
    else:
        spread = np.var(resampled, axis=1, ddof=1)
    return Estimates(
        observed=np.where(n > 0, mean, np.nan),
        resampled=resampled,
        standard_error=se,
        bootstrap_variance=spread * small_sample,
        df=clusters - 1.0,
        n=n,
    )


def row_means(values: np.ndarray, resamples: Resamples) -> Estimates:
    """Every row's mean over the items it answered (``values``: rows x items, NaN where none)."""
    return _estimates(values, ~np.isnan(values), resamples)


def pair_differences(values: np.ndarray, pairs: np.ndarray, resamples: Resamples) -> Estimates:
    """Mean difference a - b of each pair ``(a, b)`` of rows of ``values`` (rows x items) over the items both
    answered: the paired bootstrap."""
    pairs = np.asarray(pairs, dtype=np.intp).reshape(-1, 2)
    a, b = values[pairs[:, 0]], values[pairs[:, 1]]
    shared = ~np.isnan(a) & ~np.isnan(b)
    return _estimates(np.where(shared, a - b, 0.0), shared, resamples)


@dataclass(frozen=True)
class PairedTest:
    """What one column says about a set of pairs: percentile CI and two-sided p-value of each difference."""

    ci_low: np.ndarray
    ci_high: np.ndarray
    p: np.ndarray


def paired_test(differences: Estimates, confidence: float) -> PairedTest:
    """Percentile CI of each difference, and its two-sided p-value from the bootstrap distribution: the
    difference over the resampled differences' SD, referred to Student's t with the estimate's degrees of
    freedom (the bootstrap's spread made unbiased, as a paired t-test would; t, not the normal, so that a
    subtask of few items is not overconfident).

    Not the share of resamples beyond 0: a share cannot go below 1 / resamples, and Holm over a family of m
    comparisons needs p below alpha / m. A difference resting on fewer than two items (clusters) gets no
    p-value."""
    k = len(differences.observed)
    alpha = (1.0 - confidence) / 2.0
    usable = ~np.isnan(differences.bootstrap_variance)
    low, high, p = np.full(k, np.nan), np.full(k, np.nan), np.full(k, np.nan)
    if usable.any():
        kept = differences.resampled[usable]
        quantile = np.nanquantile if np.isnan(kept).any() else np.quantile
        low[usable], high[usable] = quantile(kept, [alpha, 1.0 - alpha], axis=1)
        observed, variance = np.abs(differences.observed[usable]), differences.bootstrap_variance[usable]
        with np.errstate(invalid="ignore", divide="ignore"):
            t = np.where(variance > 0, observed / np.sqrt(variance), np.where(observed == 0, 0.0, np.inf))
        p[usable] = 2.0 * stdtr(differences.df[usable], -t)
    return PairedTest(low, high, p)


@dataclass(frozen=True)
class RankIntervals:
    rank: np.ndarray  # (rows,) observed rank, 1 = best; NaN where a row has no value
    low: np.ndarray
    high: np.ndarray


def rank_intervals(means: Estimates, confidence: float) -> RankIntervals:
    """Each row's rank among the rows (1 = the highest value; tied rows share the better rank), observed and
    over the resamples: the central ``confidence`` share of the resampled ranks, as rank intervals."""
    observed = means.observed
    rank = _ranks(observed[:, None])[:, 0]
    resampled = _ranks(means.resampled)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.full(len(observed), np.nan), np.full(len(observed), np.nan)
    for row in np.flatnonzero(~np.isnan(observed)):
        ranks = resampled[row][~np.isnan(resampled[row])]
        if ranks.size:
            low[row] = np.quantile(ranks, alpha, method="inverted_cdf")
            high[row] = np.quantile(ranks, 1.0 - alpha, method="inverted_cdf")
    return RankIntervals(rank, low, high)


def _ranks(values: np.ndarray) -> np.ndarray:
    """(rows, draws) -> rank of each row within its draw: 1 + the rows strictly above it; NaN stays NaN."""
    filled = np.where(np.isnan(values), -np.inf, values)
    above = (filled[None, :, :] > filled[:, None, :]).sum(axis=1)
    return np.where(np.isnan(values), np.nan, 1.0 + above)
