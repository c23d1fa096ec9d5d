"""The smallest difference a comparison can detect: the minimum detectable difference (MDD) of a two-sided
test at a confidence level with a given power."""

from __future__ import annotations

from statistics import NormalDist

import numpy as np

POWER = 0.80  # the conventional power the MDD is quoted at


def detectable_factor(confidence: float, power: float = POWER) -> float:
    """z_{1-alpha/2} + z_{power}: the MDD in standard errors of the difference (2.80 at 95 % and 80 %)."""
    normal = NormalDist()
    return normal.inv_cdf(1.0 - (1.0 - confidence) / 2.0) + normal.inv_cdf(power)


def minimum_detectable_difference(standard_error: np.ndarray | float, confidence: float) -> np.ndarray:
    """(z_{1-alpha/2} + z_{0.8}) * SE: a true difference this large is found with 80 % power (before any
    multiple-comparison correction, which asks for more)."""
    return detectable_factor(confidence) * np.asarray(standard_error, dtype=np.float64)
