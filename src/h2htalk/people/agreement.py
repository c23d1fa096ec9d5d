"""Krippendorff's alpha between raters, and between the judge and people, with a bootstrap CI.

Levels of measurement: ordinal for scores (the rubric's 0-5, safety's 1-5: only the order of the values
counts), nominal for violations and decisions. Between raters, every rating of every item counts; an item joins
once it has two. The judge against people: the judge's value of an item (the mean of its samples, or their
majority) and the people's consensus (median, majority; a tie is left out) as two coders, so the number says
how well the judge stands in for the people's verdict rather than for any one rater.

The CI is a seeded percentile bootstrap (``scoring.bootstrap``) that resamples items, or whole groups of items
(a safety scenario's turns together, as Table 3 resamples them), and recomputes alpha on each resample over
the value domain of the full data. Data from a single group (one scenario) get no interval.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from h2htalk.people.consensus import Consensus, Item, by_item, consensus, majority, median_score
from h2htalk.ratings import Rating
from h2htalk.settings import BootstrapSettings

if TYPE_CHECKING:  # numpy and krippendorff wait for an alpha: the tables that declare stages import this module
    import numpy as np

ORDINAL, NOMINAL = "ordinal", "nominal"
MEASURE = "krippendorff_alpha"


@dataclass(frozen=True)
class Alpha:
    value: float | None  # None: no item has two values, or every value is the same (alpha is undefined)
    ci_low: float | None
    ci_high: float | None
    items: int  # items with at least two values
    ratings: int  # people's ratings on those items
    coders: int  # raters; the judge and the people: 2

    def as_row(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "value_ci_low": self.ci_low,
            "value_ci_high": self.ci_high,
            "measure": MEASURE,
            "items": self.items,
            "ratings": self.ratings,
            "coders": self.coders,
        }

    def text(self) -> str:
        """alpha [low, high], or why there is none."""
        if self.value is None:
            return "undefined" if self.items else "no items"
        ci = f" [{self.ci_low:.2f}, {self.ci_high:.2f}]" if self.ci_low is not None else ""
        return f"{self.value:.2f}{ci}"


def alpha(
    units: Sequence[Sequence[Any]],
    level: str,
    bootstrap: BootstrapSettings,
    groups: Sequence[Hashable] | None = None,
    *,
    ratings: int,
    coders: int,
) -> Alpha:
    """Alpha over ``units`` (per item, the values its coders gave; items with fewer than two are left out) at
    ``level``, with a bootstrap CI resampling items, or whole ``groups`` (one label per unit)."""
    import numpy as np

    kept = [(list(values), groups[i] if groups is not None else i) for i, values in enumerate(units) if len(values) > 1]
    if not kept:
        return Alpha(None, None, None, 0, ratings, coders)
    domain = sorted({v for values, _ in kept for v in values})
    index = {v: i for i, v in enumerate(domain)}
    counts = np.zeros((len(kept), len(domain)))
    for row, (values, _) in enumerate(kept):
        for value in values:
            counts[row, index[value]] += 1
    value = _alpha(counts, level)
    labels, members = np.unique(np.asarray([str(g) for _, g in kept], dtype=object), return_inverse=True)
    rows_of = [np.flatnonzero(members == g) for g in range(len(labels))]
    rng = np.random.default_rng(bootstrap.seed)
    draws = []
    drawn_groups = len(rows_of) > 1  # one group resampled is always itself: no interval
    for _ in range(bootstrap.resamples if value is not None and drawn_groups else 0):
        drawn = rng.integers(0, len(rows_of), size=len(rows_of))
        draws.append(_alpha(counts[np.concatenate([rows_of[g] for g in drawn])], level))
    defined = np.array([d for d in draws if d is not None])
    low = high = None
    if defined.size:
        tail = (1.0 - bootstrap.confidence) / 2.0
        low, high = (float(q) for q in np.quantile(defined, [tail, 1.0 - tail]))
    return Alpha(value, low, high, len(kept), ratings, coders)


def _alpha(counts: np.ndarray, level: str) -> float | None:
    """Alpha from an items x values table of counts; None where it is undefined (no variation at all)."""
    import krippendorff
    import numpy as np

    if np.count_nonzero(counts.sum(axis=0)) < 2:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        value = krippendorff.alpha(
            value_counts=counts, value_domain=np.arange(counts.shape[1], dtype=float), level_of_measurement=level
        )
    return float(value) if np.isfinite(value) else None


def between_raters(
    ratings: Sequence[Rating],
    field: str,
    level: str,
    bootstrap: BootstrapSettings,
    group_of: Callable[[Item], Hashable] | None = None,
) -> Alpha:
    """Alpha of every rater's ``field`` over the items rated at least twice."""
    rated = by_item(r for r in ratings if field in r.values)
    items = sorted(rated)
    units = [[r.values[field] for r in rated[item]] for item in items]
    groups = [group_of(item) for item in items] if group_of else None
    twice = [u for u in units if len(u) > 1]
    coders = len({r.rater for item in items if len(rated[item]) > 1 for r in rated[item]})
    return alpha(units, level, bootstrap, groups, ratings=sum(map(len, twice)), coders=coders)


def judge_vs_people(
    judge: Mapping[Item, Any],
    people: Mapping[Item, Consensus],
    level: str,
    bootstrap: BootstrapSettings,
    group_of: Callable[[Item], Hashable] | None = None,
) -> Alpha:
    """Alpha of the judge's value against the people's consensus, over the items that have both (a tie, or an
    item the judge left without a value, is left out)."""
    items = sorted(i for i, c in people.items() if not c.tied and judge.get(i) is not None)
    units = [[judge[i], people[i].value] for i in items]
    groups = [group_of(i) for i in items] if group_of else None
    return alpha(units, level, bootstrap, groups, ratings=sum(len(people[i].ratings) for i in items), coders=2)


BETWEEN_RATERS, JUDGE_VS_PEOPLE = "between raters", "judge vs people"
ALL_JUDGED = "judged subtasks"  # the scope of the rows over every judged subtask
COLUMNS = (  # a report row's (``compare``): the agreement table's columns
    "scope", "field", "level", "comparison", "value", "value_ci_low", "value_ci_high", "measure", "items", "ratings",
    "coders",
)  # fmt: skip


def compare(
    scope: str,
    field: str,
    level: str,
    ratings: Sequence[Rating],
    judge: Mapping[Item, Any] | None,
    bootstrap: BootstrapSettings,
    group_of: Callable[[Item], Hashable] | None = None,
) -> list[dict[str, Any]]:
    """The report rows of one field: alpha between raters, and, with ``judge`` (item -> its value), between the
    judge and the people's consensus."""
    head = {"scope": scope, "field": field, "level": level}
    raters = between_raters(ratings, field, level, bootstrap, group_of)
    rows = [{**head, "comparison": BETWEEN_RATERS, **raters.as_row()}]
    if judge is not None:
        people = consensus(ratings, field, median_score if level == ORDINAL else majority)
        found = judge_vs_people(judge, people, level, bootstrap, group_of)
        rows.append({**head, "comparison": JUDGE_VS_PEOPLE, **found.as_row()})
    return rows


def note(rows: Sequence[dict[str, Any]], unit: str, confidence: float) -> str:
    """One line for under a table: alpha with its CI and what it rests on, per field and comparison."""
    if not any(r["ratings"] for r in rows):
        return f"Agreement (Krippendorff's alpha): no ratings by people of these {unit} yet."
    parts = []
    for field in dict.fromkeys(r["field"] for r in rows):
        shown = []
        for row in (r for r in rows if r["field"] == field):
            found = Alpha(row["value"], row["value_ci_low"], row["value_ci_high"], row["items"], 0, 0)
            coders = f", {row['coders']} raters" if row["comparison"] == BETWEEN_RATERS else ""
            shown.append(
                f"{row['comparison']} {found.text()} ({row['items']} {unit}, {row['ratings']} ratings{coders})"
            )
        level = next(r["level"] for r in rows if r["field"] == field)
        parts.append(f"{field.replace('_', ' ')} ({level}): " + "; ".join(shown))
    return f"Agreement (Krippendorff's alpha, {confidence:.0%} bootstrap CI): " + ". ".join(parts) + "."
