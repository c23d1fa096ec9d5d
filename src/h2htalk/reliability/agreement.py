"""Krippendorff's alpha for the card: a judge against itself (its k samples of an item) and against its own previous
run (the drift canary); against people it is the agreement report's (``h2htalk.people.agreement``).

Ordinal for scores (the rubric's 0-5, safety's 1-5: only their order counts), nominal for decisions. Alpha is
undefined, and reported as None with the reason, when no item has two values or when every value is the same.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

ORDINAL, NOMINAL = "ordinal", "nominal"


@dataclass(frozen=True)
class Alpha:
    value: float | None
    items: int  # items with at least two values
    why: str = ""  # why there is no value

    def text(self) -> str:
        return f"{self.value:.2f}" if self.value is not None else f"undefined ({self.why})"


def krippendorff_alpha(units: Iterable[Sequence[float | None]], level: str) -> Alpha:
    """Alpha over ``units`` (per item, the values its coders gave; None: that coder gave none)."""
    import krippendorff
    import numpy as np

    kept = [[float(v) for v in values if v is not None] for values in units]
    kept = [values for values in kept if len(values) > 1]
    if not kept:
        return Alpha(None, 0, "no item has two values")
    if len({v for values in kept for v in values}) < 2:
        return Alpha(None, len(kept), "every value is the same")
    width = max(map(len, kept))
    data = np.full((width, len(kept)), np.nan)  # coders x units
    for column, values in enumerate(kept):
        data[: len(values), column] = values
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        value = float(krippendorff.alpha(reliability_data=data, level_of_measurement=level))
    return Alpha(value if np.isfinite(value) else None, len(kept), "" if np.isfinite(value) else "no variation")


def self_consistency(records: Iterable[Mapping[str, Any]], field: str, level: str) -> Alpha:
    """Alpha across a judge's own samples of each item: ``records`` are judge sample or verdict records, each
    with its ``samples``; the samples' ``field`` values are the coders. One sample per item leaves it undefined."""
    units = [[s.get(field) for s in record["samples"]] for record in records]
    found = krippendorff_alpha(units, level)
    if found.value is None and all(len(u) < 2 for u in units):
        return Alpha(None, 0, "one sample per item")
    return found
