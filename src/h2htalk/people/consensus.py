"""One value per item from its raters, as the paper's annotators decided: the median of scores, the majority
of categories (violation or not, keep or drop).

A tie (two values equally often the most common, as one keep and one drop) is never settled by a rule: the
item has no consensus, its value stays undecided and it goes back to the queue for another rater. The median
of an even number of scores is the mean of the two middle ones, a score like any other.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from h2htalk.ratings import Rating

Item = tuple[str, ...]


def median_score(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def majority(values: Sequence[Hashable]) -> Any | None:
    """The most common value, or None when two or more values are equally common (a tie)."""
    counts = Counter(values).most_common()
    if len(counts) > 1 and counts[0][1] == counts[1][1]:
        return None
    return counts[0][0]


@dataclass(frozen=True)
class Consensus:
    """The raters' value of one item for one field: None when they tie."""

    value: Any
    ratings: tuple[Rating, ...]  # the ratings that gave this field a value

    @property
    def tied(self) -> bool:
        return self.value is None

    def sources(self, field: str) -> list[dict[str, Any]]:
        """Who rated, where it was read, and what they gave: for the records of the item."""
        return [{**r.source(), field: r.values[field]} for r in self.ratings]


def by_item(ratings: Iterable[Rating]) -> dict[Item, list[Rating]]:
    grouped: dict[Item, list[Rating]] = {}
    for rating in ratings:
        grouped.setdefault(rating.item, []).append(rating)
    return grouped


def consensus(
    ratings: Iterable[Rating], field: str, decide: Callable[[Sequence[Any]], Any | None]
) -> dict[Item, Consensus]:
    """Item -> its raters' value of ``field`` (``median_score`` or ``majority``), for every item that some rater
    gave a value of ``field``."""
    out = {}
    for item, rated in by_item(r for r in ratings if field in r.values).items():
        out[item] = Consensus(decide([r.values[field] for r in rated]), tuple(rated))
    return out


def tied(found: dict[Item, Consensus]) -> list[Item]:
    """The items whose raters tie: each needs another rater."""
    return sorted(item for item, c in found.items() if c.tied)
