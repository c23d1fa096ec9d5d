"""Who rates what: each item to ``per_item`` different raters, balanced, seeded; and each rater's own order.

Items are handed out one at a time to the raters with the fewest items of that task so far (then the fewest of
all tasks, then a seeded tie-break), so no rater gets an item twice and, within each task, the raters' loads
differ by at most one. Items loaded later continue from the loads already there: raters keep what they have.
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from collections.abc import Iterable, Sequence

from h2htalk.errors import H2HTalkError


def assign(
    items: Iterable[tuple[int, str]],
    raters: Sequence[str],
    per_item: int,
    seed: int,
    loads: Iterable[tuple[str, str]] = (),
) -> list[tuple[int, str]]:
    """(item, rater) pairs for ``items`` (id, task); ``loads``: the (rater, task) of every assignment already
    made."""
    items = list(items)
    if items and per_item > len(raters):
        raise H2HTalkError(
            f"each item goes to {per_item} raters (review.raters_per_item), but {len(raters)} are listed "
            f"(review.raters: {', '.join(raters) or 'none'})"
        )
    rng = random.Random(seed)
    tie_break = {rater: rng.random() for rater in sorted(raters)}
    by_task: Counter[tuple[str, str]] = Counter()
    total: Counter[str] = Counter()
    for rater, task in loads:
        by_task[rater, task] += 1
        total[rater] += 1
    pairs = []
    for item, task in items:
        chosen = sorted(raters, key=lambda r: (by_task[r, task], total[r], tie_break[r]))[:per_item]
        for rater in chosen:
            by_task[rater, task] += 1
            total[rater] += 1
            pairs.append((item, rater))
    return pairs


def rater_order(seed: int, rater: str, task: str, key: str) -> str:
    """A sort key that puts one rater's items in their own seeded random order."""
    return hashlib.sha256(f"{seed}\x00{rater}\x00{task}\x00{key}".encode()).hexdigest()
