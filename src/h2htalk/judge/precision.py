"""The size of a cascade cell's sample that meets a target half-width (``sample_per_cell: auto``).

A cell of N items, the cheap judge's value g on all of them and the role's judge's y on a random n of them: the
prediction-powered mean's variance is var(y)/N + var(y − g)·(1/n − 1/N) (``h2htalk.people.prediction_powered``,
one item a cluster), i.e. ``part_of_y``/N + ``var_difference``/n with part_of_y = var(y) − var(y − g) =
var(g) + 2·cov(g, y − g). A pilot (the first items of the cell's sample) measures both; before any verdict an
assumed correlation ρ between the judges and an assumed spread σ of the role's judge's values stand in, the cheap
judge's value taken as the role's judge's plus a bias and independent noise (as the known-answer worlds build
it): var(y − g) = σ²(1/ρ² − 1), part_of_y = σ²(2 − 1/ρ²). A cheap judge with the role's judge's own spread would
need fewer items (var(y − g) = 2σ²(1 − ρ)), so the assumption errs towards more. The size is the least n whose 95 %
half-width is at most the target, never below the pilot and at most N (the whole cell: full mode).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

Z95 = NormalDist().inv_cdf(0.975)  # the target is the half-width of the cell's 95 % interval
MEASURED, ASSUMED = "pilot", "assumed"


@dataclass(frozen=True)
class Spread:
    """What a cell's half-width depends on besides n: its items, var(y) − var(y − g) and var(y − g)."""

    items: int  # N
    part_of_y: float
    var_difference: float
    source: str  # MEASURED (a pilot's pairs) or ASSUMED
    pairs: int = 0  # the pilot's items with both judges' values

    def half_width(self, n: int) -> float:
        """The 95 % half-width with n items sampled (capped at N)."""
        n = min(n, self.items)
        return Z95 * math.sqrt(max(0.0, self.part_of_y / self.items + self.var_difference / n))

    def size_for(self, target: float, least: int) -> int:
        """The least n ≥ ``least`` whose half-width is at most ``target``; N where not even N meets it."""
        room = (target / Z95) ** 2 - self.part_of_y / self.items
        if room <= 0:
            return self.items
        needed = math.ceil(self.var_difference / room - 1e-9)  # the float's last digit never adds an item
        return max(min(least, self.items), min(needed, self.items))


def assumed_spread(items: int, correlation: float, sd: float) -> Spread:
    """The spread of a cell before any verdict: the role's judge's values with spread ``sd``, the cheap judge's
    theirs plus independent noise, correlated ``correlation`` with them (above 0)."""
    variance, noise = sd * sd, 1 / (correlation * correlation) - 1
    return Spread(items, variance * (1 - noise), variance * noise, ASSUMED)


def measured_spread(items: int, cheap: Sequence[float], pairs: Sequence[tuple[float, float]]) -> Spread | None:
    """The spread a pilot measures in a cell of ``items`` items: ``cheap``, the cheap judge's values where it gave
    one; ``pairs``, (the role's judge's value, the cheap judge's) on the pilot's items that have both. None with
    fewer than 2 pairs."""
    if len(pairs) < 2 or not cheap:
        return None
    strong, predicted = np.array(pairs, float).T
    difference = strong - predicted
    var_g = float(np.var(cheap, ddof=1)) if len(cheap) > 1 else 0.0
    covariance = float(np.cov(predicted, difference, ddof=1)[0, 1])
    return Spread(items, var_g + 2 * covariance, float(np.var(difference, ddof=1)), MEASURED, len(pairs))
