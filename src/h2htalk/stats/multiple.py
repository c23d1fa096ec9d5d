"""Holm's step-down correction of a family of p-values."""

from __future__ import annotations

import numpy as np


def holm(p_values: np.ndarray) -> np.ndarray:
    """Holm-adjusted p-values of one family (NaN: not tested, left out of the family and kept NaN).

    The i-th smallest of m p-values is multiplied by m - i + 1, running maxima keep the order, and nothing
    exceeds 1: a comparison is significant at level alpha exactly when Holm's procedure rejects it. Holm holds
    the chance of any false claim in the family under alpha whatever the dependence between the tests.
    """
    p = np.asarray(p_values, dtype=np.float64)
    adjusted = np.full(p.shape, np.nan)
    tested = np.flatnonzero(~np.isnan(p))
    if tested.size == 0:
        return adjusted
    order = tested[np.argsort(p[tested], kind="stable")]
    m = order.size
    scaled = p[order] * (m - np.arange(m))
    adjusted[order] = np.minimum(np.maximum.accumulate(scaled), 1.0)
    return adjusted
