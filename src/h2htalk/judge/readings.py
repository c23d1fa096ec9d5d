"""The readings of a judged item, the values ``tables.judged_cell`` can pick, on S's 0-100 scale: ``J`` (S mixed
with the rubric judge, J100), ``S`` (the metric alone) and ``judge`` (the judge's score x 20). Kept apart from
``h2htalk.judge.combine`` so that the tables read them without the scoring stack."""

from __future__ import annotations

from typing import Any

READINGS: tuple[str, ...] = ("J", "S", "judge")  # the values tables.judged_cell can pick


def item_readings(item: dict[str, Any]) -> dict[str, float | None]:
    """One item's value under each reading of a judged cell, all on 0-100 (None: that reading has none)."""
    judge = item["judge_score"]
    return {"J": item["J100"], "S": item["S"], "judge": None if judge is None else 20.0 * judge}
