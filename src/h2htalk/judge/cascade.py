"""The cascade of judges (``rubric_judge.mode`` / ``study_judge.mode``: cascade): a cheap judge on every item, the
role's own judge on a seeded sample of each cell.

The sample is drawn from the cell's item ids alone (``sample_order``: a hash of the seed, the variant, the subtask
and the id), so it is fixed before any verdict is seen, the plan counts it exactly, and a changed verdict never
moves it. Every model of a (variant, subtask) draws from the same order, so their samples are the same items (a
paired comparison meets both judges on them). Each cell is its own stratum: every cell gets ``sample_per_cell``
items (all of them when it has fewer), whatever its size. With ``sample_per_cell: auto`` the first
``pilot_per_cell`` items of the order are a pilot: the role's judge judges them, their spread sets the size that
meets ``target_half_width`` (``h2htalk.judge.precision``), and the sample is that many items of the same order. The
cell's mean is then the cheap judge's corrected by the sample (``h2htalk.judge.combine``, ``h2htalk.tables.table3``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from h2htalk.generation.ended import unanswered
from h2htalk.io import iter_jsonl
from h2htalk.judge.precision import assumed_spread, measured_spread
from h2htalk.layout import Cell
from h2htalk.people.prediction_powered import sample_order
from h2htalk.settings import CascadeSettings


def cascade_sample(cell: Cell, ids: Iterable[str], cascade: CascadeSettings, size: int | None = None) -> list[str]:
    """The first ``size`` items (default ``sample_per_cell``: the pilot in auto mode; all of them when the cell has
    fewer) of the seeded order of ``cell``'s variant and subtask, the same for every model: the items the role's own
    judge judges."""
    order = sample_order(Cell("", cell.variant, cell.task), ids, cascade.sample_seed)
    return order[: cascade.sample_per_cell if size is None else size]


def sized_sample(
    cell: Cell, ids: list[str], cascade: CascadeSettings, cheap: Mapping[str, float], strong: Mapping[str, float]
) -> tuple[list[str], dict[str, Any]]:
    """In auto mode, ``cell``'s sample and the record of its size: ``cheap`` holds the cheap judge's values of the
    cell's items, ``strong`` the role's judge's of the pilot's (both in the target's units; an item without a
    value is absent). The size is the pilot's measured spread's, or the assumed one's where the pilot has fewer
    than 2 items with both values."""
    auto = cascade.auto
    assert auto is not None, "a sized sample is auto mode's"
    pilot = cascade_sample(cell, ids, cascade)
    pairs = [(strong[i], cheap[i]) for i in pilot if i in strong and i in cheap]
    spread = measured_spread(len(ids), list(cheap.values()), pairs) or assumed_spread(
        len(ids), auto.assumed_correlation, auto.assumed_sd
    )
    size = spread.size_for(auto.target_half_width, len(pilot))
    record = {
        "items": len(ids), "pilot": len(pilot), "size": size, "spread": spread.source, "pairs": spread.pairs,
        "var_difference": round(spread.var_difference, 4), "part_of_y": round(spread.part_of_y, 4),
        "target_half_width": auto.target_half_width, "expected_half_width": round(spread.half_width(size), 4),
    }  # fmt: skip
    return cascade_sample(cell, ids, cascade, size), record


def answered_ids(generations: Path) -> list[str]:
    """The items of a generation file a judge is asked about: all but a conversation's turns never sent (an earlier
    turn got no answer), which no judge sees."""
    return [record["id"] for _, record in iter_jsonl(generations) if not unanswered(record)]


def judge_reading(verdicts: Path) -> dict[str, float]:
    """Item id -> the judge reading (0-100: the judge's mean score x20) of a rubric verdict file's items that have
    one: what ``rubric_judge.target_half_width`` is in."""
    return {r["id"]: 20.0 * r["judge_mean"] for _, r in iter_jsonl(verdicts) if r.get("judge_mean") is not None}
