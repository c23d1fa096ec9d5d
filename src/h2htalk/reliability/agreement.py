"""Krippendorff's alpha for the card: a judge against itself (its k samples of an item) and against its own previous
run (the drift canary); against people it is the agreement report's (``h2htalk.people.agreement``).

Ordinal for scores (the rubric's 0-5, safety's 1-5: only their order counts), nominal for decisions, interval for
two judges' item means. Alpha is undefined, and reported as None with the reason, when no item has two values or
when every value is the same.

Alpha is computed here from the pairs of values within each item, as Krippendorff defines it, not by the
``krippendorff`` package (which the tests hold it to): the package builds an items x values x values array of
coincidences, whose size grows with the square of the distinct values, and means over samples take many (two
judges on a cascade's sample of 1,260 items: 2.1 GB). Here memory grows with the values only.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy waits for an alpha to be computed
    import numpy as np

ORDINAL, NOMINAL, INTERVAL = "ordinal", "nominal", "interval"
BLOCK = 1 << 20  # value pairs whose distances are held at once for the expected disagreement


@dataclass(frozen=True)
class Alpha:
    value: float | None
    items: int  # items with at least two values
    why: str = ""  # why there is no value

    def text(self) -> str:
        return f"{self.value:.2f}" if self.value is not None else f"undefined ({self.why})"


def krippendorff_alpha(units: Iterable[Sequence[float | None]], level: str) -> Alpha:
    """Alpha over ``units`` (per item, the values its coders gave; None: that coder gave none): one minus the
    disagreement observed within the items over the disagreement expected between any two of their values."""
    import numpy as np

    kept = [[float(v) for v in values if v is not None] for values in units]
    kept = [values for values in kept if len(values) > 1]
    if not kept:
        return Alpha(None, 0, "no item has two values")
    domain, index = np.unique(np.fromiter(itertools.chain.from_iterable(kept), float), return_inverse=True)
    if len(domain) < 2:
        return Alpha(None, len(kept), "every value is the same")
    counts = np.bincount(index, minlength=len(domain)).astype(float)  # each value's pairable values
    pairable = float(counts.sum())  # a Python float makes alpha one, for JSON
    observed = _observed(level, domain, counts, index, [len(values) for values in kept])
    expected = _expected(level, domain, counts)
    value = 1.0 - (pairable - 1.0) * observed / expected if expected > 0 else float("nan")
    return Alpha(value if np.isfinite(value) else None, len(kept), "" if np.isfinite(value) else "no variation")


def _distance(level: str, domain: np.ndarray, counts: np.ndarray, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Krippendorff's squared distance between the values at ``first`` and ``second`` (indices into ``domain``):
    nominal 0 or 1; interval the squared difference; ordinal the values from one to the other, ends halved,
    squared."""
    import numpy as np

    if level == NOMINAL:
        return (first != second).astype(float)
    if level == INTERVAL:
        return (domain[first] - domain[second]) ** 2
    if level != ORDINAL:
        raise ValueError(f"no level of measurement {level!r} (one of {NOMINAL}, {ORDINAL}, {INTERVAL})")
    low, high = np.minimum(first, second), np.maximum(first, second)
    below = np.concatenate(([0.0], np.cumsum(counts)))  # below[k]: the values under the k-th
    return (below[high + 1] - below[low] - (counts[low] + counts[high]) / 2.0) ** 2


def _observed(level: str, domain: np.ndarray, counts: np.ndarray, index: np.ndarray, lengths: list[int]) -> float:
    """The distances of every pair of values within an item, each item's weighed by one over its values less one."""
    import numpy as np

    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    total = 0.0
    for size in sorted(set(lengths)):
        at = starts[np.array(lengths) == size]
        for i, j in itertools.combinations(range(size), 2):
            total += 2.0 * float(_distance(level, domain, counts, index[at + i], index[at + j]).sum()) / (size - 1)
    return total


def _expected(level: str, domain: np.ndarray, counts: np.ndarray) -> float:
    """The distances of every pair of distinct values of all items, each weighed by both values' counts, a block of
    values at a time."""
    import numpy as np

    every = np.arange(len(domain))
    rows = max(1, BLOCK // len(domain))
    total = 0.0
    for start in range(0, len(domain), rows):
        block = every[start : start + rows, np.newaxis]
        distances = _distance(level, domain, counts, block, every[np.newaxis, :])
        total += float((counts[block] * distances * counts[np.newaxis, :]).sum())
    return total


def self_consistency(records: Iterable[Mapping[str, Any]], field: str, level: str) -> Alpha:
    """Alpha across a judge's own samples of each item: ``records`` are judge sample or verdict records, each
    with its ``samples``; the samples' ``field`` values are the coders. One sample per item leaves it undefined."""
    units = [[s.get(field) for s in record["samples"]] for record in records]
    found = krippendorff_alpha(units, level)
    if found.value is None and all(len(u) < 2 for u in units):
        return Alpha(None, 0, "one sample per item")
    return found
