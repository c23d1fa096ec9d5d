"""The cascade of judges (``rubric_judge.mode`` / ``study_judge.mode``: cascade): a cheap judge on every item, the
role's own judge on a seeded sample of each cell.

The sample is drawn from the cell's item ids alone (``sample_order``: a hash of the seed, the cell and the id), so
it is fixed before any verdict is seen, the plan counts it exactly, and a changed verdict or another cell never
moves it. Each cell is its own stratum: every cell gets ``sample_per_cell`` items (all of them when it has fewer),
whatever its size, so the correction of a small cell rests on as many items as that of a large one. The cell's
mean is then the cheap judge's corrected by the sample (``h2htalk.judge.combine``, ``h2htalk.tables.table3``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from h2htalk.io import iter_jsonl
from h2htalk.layout import Cell
from h2htalk.people.prediction_powered import sample_order
from h2htalk.settings import CascadeSettings, JudgeSettings


def every_item_judge(judge: JudgeSettings, cascade: CascadeSettings) -> JudgeSettings:
    """The judge of every item: the cheap one in cascade mode (with the role's sampling), else the role's own."""
    return replace(judge, model=cascade.cheap_model) if cascade.on else judge


def judge_models(judge: JudgeSettings, cascade: CascadeSettings) -> list[str]:
    """The models a judging job starts, in the order it uses them: the cheap judge, then the role's own."""
    return list(dict.fromkeys([every_item_judge(judge, cascade).model, judge.model]))


def cascade_sample(cell: Cell, ids: Iterable[str], cascade: CascadeSettings) -> list[str]:
    """The ``sample_per_cell`` items of ``cell`` (all of them when it has fewer) the role's own judge judges."""
    return sample_order(Cell(cell.model, cell.variant, cell.task), ids, cascade.sample_seed)[: cascade.sample_per_cell]


def answered_ids(generations: Path) -> list[str]:
    """The items of a generation file a judge is asked about: all but a conversation's turns never sent (an earlier
    turn got no answer), which no judge sees."""
    from h2htalk.studies.run import unanswered  # the model-call stack, for the jobs that call models only

    return [record["id"] for _, record in iter_jsonl(generations) if not unanswered(record)]
