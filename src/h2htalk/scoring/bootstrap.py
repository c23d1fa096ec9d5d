"""Seeded percentile bootstrap confidence intervals for means."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

_CHUNK = 100  # resamples drawn at a time, to bound memory on large subtasks


def bootstrap_mean_ci(
    values: np.ndarray,
    resamples: int,
    seed: int,
    confidence: float,
    groups: Sequence[Hashable] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Percentile CI of the column means of ``values`` (n items x k metrics), resampling items.

    The same resampled item sets are used for every column, so the intervals of different metrics (and
    of S, their mean) are consistent with each other. With ``groups`` (one label per item), whole groups are
    resampled (a cluster bootstrap: the turns of one conversation are not independent), and each resample's
    mean is over all items of the drawn groups. Returns (low, high), each of length k.
    """
    data = np.asarray(values, dtype=np.float64)
    if data.ndim == 1:
        data = data[:, None]
    n, k = data.shape
    if n == 0:
        nan = np.full(k, np.nan)
        return nan, nan.copy()
    if groups is None:
        sums, counts = data, np.ones(n)
    else:
        labels, index_of = np.unique(np.asarray(groups, dtype=object).astype(str), return_inverse=True)
        sums = np.zeros((len(labels), k))
        np.add.at(sums, index_of, data)
        counts = np.bincount(index_of, minlength=len(labels)).astype(np.float64)
    rng = np.random.default_rng(seed)
    means = np.empty((resamples, k))
    drawn = len(counts)
    for start in range(0, resamples, _CHUNK):
        size = min(_CHUNK, resamples - start)
        index = rng.integers(0, drawn, size=(size, drawn))
        means[start : start + size] = sums[index].sum(axis=1) / counts[index].sum(axis=1)[:, None]
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha], axis=0)
    return low, high


def paired_bootstrap_diff(
    a: np.ndarray,
    b: np.ndarray,
    resamples: int,
    seed: int,
    confidence: float,
    groups: Sequence[Hashable] | None = None,
) -> tuple[float, float, float]:
    """Mean of ``a - b`` over paired items, with a percentile CI from resampling the pairs together (whole
    groups of pairs with ``groups``)."""
    diff = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    if diff.size == 0:
        return float("nan"), float("nan"), float("nan")
    low, high = bootstrap_mean_ci(diff, resamples=resamples, seed=seed, confidence=confidence, groups=groups)
    return float(diff.mean()), float(low[0]), float(high[0])
