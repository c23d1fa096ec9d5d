"""The review queue: the items the judges' gate (or review.mode sample) sends to people, as one CSV a reviewer
fills in (``human_score``, 0-5) and ``review.imports`` reads back."""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterable
from pathlib import Path

from h2htalk.io import iter_jsonl, write_text_atomic
from h2htalk.judge.combine import reviewed_verdict
from h2htalk.stages.declare import stage
from h2htalk.stages.declared import judged_cells
from h2htalk.stages.spec import Done, Each, One

QUEUE_COLUMNS: tuple[str, ...] = (
    "model", "variant", "subtask", "id", "reason", "S", "judge_mean", "judge_scores", "J5", "task", "response",
    "reference", "judge_evidence", "human_score", "reviewer", "notes",
)  # fmt: skip


@stage(
    "review_queue", "collect the items sent to people (gated, or sampled) into one CSV",
    reads=("models", "baselines", "rubric_judge.baselines", "scoring.embedders", "subtasks", "variants"),
    cells=lambda run, w: [c.scored_by(run.embedder) for c in judged_cells(run, w)], env="metrics",
    inputs={"j_items": Each("j_items")}, outputs={"queue": One("review_queue")},
)  # fmt: skip
def write_review_queue(j_items: Iterable[str | os.PathLike[str]], queue: str | os.PathLike[str]) -> Done:
    """Every item of the cells' J files (``j_items``) sent to review (gated, or sampled in sample mode), with what a
    reviewer needs, as the CSV ``queue`` (fill in human_score, 0-5)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(QUEUE_COLUMNS), lineterminator="\n")
    writer.writeheader()
    count = 0
    for path in j_items:
        for _, item in iter_jsonl(path):
            if not item["review"]:
                continue
            verdict = reviewed_verdict(item)
            writer.writerow({
                "model": item["model"], "variant": item["variant"], "subtask": item["subtask"], "id": item["id"],
                "reason": "; ".join(item["review_reasons"]), "S": f"{item['S']:.2f}",
                "judge_mean": "" if verdict["judge_mean"] is None else f"{verdict['judge_mean']:.2f}",
                "judge_scores": " ".join("-" if s is None else f"{s:g}" for s in verdict["judge_scores"]),
                "J5": "" if verdict["J5"] is None else f"{verdict['J5']:.2f}",
                "task": item["task"], "response": item["response"], "reference": item["reference"],
                "judge_evidence": verdict["judge_evidence"],
                "human_score": "", "reviewer": "", "notes": "",
            })  # fmt: skip
            count += 1
    write_text_atomic(queue, buffer.getvalue())
    return Done(f"{count} items to review", out=Path(queue))
