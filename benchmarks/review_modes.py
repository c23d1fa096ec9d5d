"""How many ratings by people one judged cell needs for a +-0.2 interval (0-5) in each review mode, simulated.

    python benchmarks/review_modes.py [--items 150 800] [--repetitions 200] [--bias 0.8] [--judge-noise 0.5]

A judged cell of N items: S ~ N(45, 10) (clipped to 0-100, the paper's usual range); the score people would
give an item, T ~ N(2.5, 1) clipped to 0-5 (so the true mean is 2.5); one person's rating T + N(0, 0.6),
clipped; the judge's T + bias + N(0, judge noise), clipped. What is estimated is the cell's mean score on the
0-5 scale people and the judge share (J's judge part: on J100 a +-0.2 is +-0.2 x 0.4 x 20 = +-1.6 points).

- judge only: the judge's mean, no ratings.
- gate (the paper's): people rate every item whose J5 = 0.6 S/20 + 0.4 judge is below 3.5; their rating
  replaces the judge's. The gate decides how many; the judge's bias stays on the items it lets through.
- sample: people rate a random sample of n items; the prediction-powered mean
  (``h2htalk.people.prediction_powered``). n: the smallest whose mean half-width is at most the target.
- people only: people rate a random sample of n items, their mean alone; n as above (N if never reached).

One rating per item (the paper's three raters per item triple every count). Intervals are normal at 95 %
(the project bootstraps the gate's; at these sizes the two agree); coverage is over the repetitions, each with
its own seed. Nothing is asserted; the figures go into docs/review_desk.md.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from h2htalk.people.prediction_powered import prediction_powered_mean

TRUE_MEAN = 2.5
Z = NormalDist().inv_cdf(0.975)


@dataclass(frozen=True)
class Cell:
    s: np.ndarray  # S, 0-100
    people: np.ndarray  # one person's rating of every item (only the rated ones are looked at)
    judge: np.ndarray


def make_cell(rng: np.random.Generator, items: int, bias: float, judge_noise: float, rater_noise: float) -> Cell:
    truth = np.clip(rng.normal(TRUE_MEAN, 1.0, items), 0, 5)
    return Cell(
        s=np.clip(rng.normal(45, 10, items), 0, 100),
        people=np.clip(truth + rng.normal(0, rater_noise, items), 0, 5),
        judge=np.clip(truth + bias + rng.normal(0, judge_noise, items), 0, 5),
    )


Estimator = Callable[[Cell, np.random.Generator], tuple[float, float, int]]  # (value, half-width, ratings)


def judge_only(cell: Cell, rng: np.random.Generator) -> tuple[float, float, int]:
    return cell.judge.mean(), Z * cell.judge.std(ddof=1) / np.sqrt(cell.judge.size), 0


def gate(cell: Cell, rng: np.random.Generator) -> tuple[float, float, int]:
    gated = 0.6 * cell.s / 20 + 0.4 * cell.judge < 3.5
    mixed = np.where(gated, cell.people, cell.judge)
    return mixed.mean(), Z * mixed.std(ddof=1) / np.sqrt(mixed.size), int(gated.sum())


def sample(n: int) -> Estimator:
    def estimate(cell: Cell, rng: np.random.Generator) -> tuple[float, float, int]:
        chosen = rng.choice(cell.judge.size, size=n, replace=False)
        found = prediction_powered_mean(cell.judge, chosen, cell.people[chosen], 0.95)
        return found.value, found.ci_high - found.value, n

    return estimate


def people_only(n: int) -> Estimator:
    def estimate(cell: Cell, rng: np.random.Generator) -> tuple[float, float, int]:
        rated = cell.people[rng.choice(cell.people.size, size=n, replace=False)]
        return rated.mean(), Z * rated.std(ddof=1) / np.sqrt(n), n

    return estimate


def run(estimator: Estimator, cells: list[Cell], seed: int) -> dict[str, float]:
    found = np.array([estimator(cell, np.random.default_rng([seed, k])) for k, cell in enumerate(cells)])
    values, halves, ratings = found[:, 0], found[:, 1], found[:, 2]
    return {
        "ratings": ratings.mean(),
        "half_width": halves.mean(),
        "coverage": np.mean(np.abs(values - TRUE_MEAN) <= halves),
        "bias": values.mean() - TRUE_MEAN,
    }


def fewest(make: Callable[[int], Estimator], cells: list[Cell], target: float, seed: int) -> dict[str, float]:
    """The result at the smallest n whose mean half-width is within ``target`` (at n = N when none is)."""
    low, high = 2, cells[0].judge.size
    if run(make(high), cells, seed)["half_width"] > target:
        return {**run(make(high), cells, seed), "reached": False}
    while low < high:
        middle = (low + high) // 2
        if run(make(middle), cells, seed)["half_width"] <= target:
            high = middle
        else:
            low = middle + 1
    return {**run(make(high), cells, seed), "reached": True}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, nargs="+", default=[150, 800], help="items in the judged cell (N)")
    parser.add_argument("--repetitions", type=int, default=200)
    parser.add_argument("--target", type=float, default=0.2, help="the half-width wanted, on 0-5")
    parser.add_argument("--bias", type=float, default=0.8, help="the judge's bias on 0-5")
    parser.add_argument("--judge-noise", type=float, default=0.5, help="sd of the judge around people's score")
    parser.add_argument("--rater-noise", type=float, default=0.6, help="sd of one person around people's score")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    header = ("N", "mode", "ratings", "half-width (0-5)", "coverage of 2.5", "bias", f"half-width ≤ {args.target}")
    print(" | ".join(header))
    print(" | ".join("---" for _ in header))
    for items in args.items:
        cells = [
            make_cell(
                np.random.default_rng([args.seed, items, k]), items, args.bias, args.judge_noise, args.rater_noise
            )
            for k in range(args.repetitions)
        ]
        results = {
            "judge only": run(judge_only, cells, args.seed),
            "gate": run(gate, cells, args.seed),
            "sample (prediction-powered)": fewest(sample, cells, args.target, args.seed),
            "people only": fewest(people_only, cells, args.target, args.seed),
        }
        for mode, found in results.items():
            within = found.get("reached", found["half_width"] <= args.target)
            print(
                f"{items} | {mode} | {found['ratings']:.0f} | {found['half_width']:.3f} | {found['coverage']:.0%} | "
                f"{found['bias']:+.3f} | {'yes' if within else 'no'}"
            )


if __name__ == "__main__":
    main()
