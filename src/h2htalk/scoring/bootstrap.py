"""Seeded percentile bootstrap confidence intervals for means, and the resamples they are drawn from."""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Sequence

import numpy as np

_CHUNK = 100  # resamples drawn at a time, to bound memory on large subtasks
Seed = int | Sequence[int]  # an int, or entropy words (np.random.default_rng accepts both)


def cluster_index(groups: Sequence[Hashable] | None, n: int) -> tuple[np.ndarray, int]:
    """(cluster of each of ``n`` items, number of clusters): one cluster a label of ``groups``, or one an item."""
    if groups is None:
        return np.arange(n), n
    labels, index_of = np.unique(np.asarray(groups, dtype=object).astype(str), return_inverse=True)
    return index_of.reshape(-1), len(labels)


def resample_counts(clusters: int, resamples: int, seed: Seed) -> Iterator[np.ndarray]:
    """How often each of ``clusters`` clusters is drawn, resample by resample: chunks of (resamples in the
    chunk, clusters) counts, each row summing to ``clusters``.

    Every interval of the project draws from this one stream: the same ``seed`` gives the same resamples to
    the CIs of a summary, to Table 3's paired delta and to Table 2's paired comparisons.
    """
    rng = np.random.default_rng(seed)
    for start in range(0, resamples, _CHUNK):
        size = min(_CHUNK, resamples - start)
        index = rng.integers(0, clusters, size=(size, clusters))
        flat = (index + clusters * np.arange(size)[:, None]).ravel()
        yield np.bincount(flat, minlength=size * clusters).reshape(size, clusters)


def bootstrap_mean_ci(
    values: np.ndarray,
    resamples: int,
    seed: Seed,
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
    index_of, drawn = cluster_index(groups, n)
    sums = np.zeros((drawn, k))
    np.add.at(sums, index_of, data)
    sizes = np.bincount(index_of, minlength=drawn).astype(np.float64)
    means = np.concatenate(
        [(counts @ sums) / (counts @ sizes)[:, None] for counts in resample_counts(drawn, resamples, seed)]
    )
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha], axis=0)
    return low, high


def paired_bootstrap_diff(
    a: np.ndarray,
    b: np.ndarray,
    resamples: int,
    seed: Seed,
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
