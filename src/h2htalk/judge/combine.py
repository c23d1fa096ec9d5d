"""Combine metrics and judge into J, apply the human-review gate, and import human scores.

Scale: J_judge is on 0-5 and S on 0-100, so S is put on 0-5 first (S/20):

    J = alpha * (S / 20) + (1 - alpha) * J_judge        (0-5; alpha = 0.6 in the paper)

Two names keep the two scales apart: ``J5`` is J on 0-5 (what tau gates), ``J100`` = 20 * J5 is J on S's 0-100
scale (what summaries and tables report). An item goes to human review when J5 < tau (3.5 on 0-5),
when its judge samples spread by more than ``max_spread``, or when the judge's answer could not be parsed
(its J is then missing, never 0). A human score, once imported, replaces the judge's mean for that item and
is recorded with the file it came from.

The paper does not say how Eq. 3 mixes S (0-100) with a judge score (0-5), so a judged cell's summary carries
three readings of it, each with its CI: ``J`` (J100 above), ``S`` (the metric alone) and ``judge`` (the judge's
score x 20). Its ``value`` is J; Table 2 shows the reading ``tables.judged_cell`` names, so switching it
reruns neither the judge nor this stage.
"""

from __future__ import annotations

import csv
import io
import os
import statistics
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from h2htalk.errors import DataError
from h2htalk.io import iter_jsonl, write_json_atomic, write_jsonl_atomic, write_text_atomic
from h2htalk.layout import Cell, Layout
from h2htalk.ratings import REVIEW_SCORES, Rating, read_ratings
from h2htalk.scoring.bootstrap import bootstrap_mean_ci
from h2htalk.scoring.metrics import cell_value
from h2htalk.scoring.score_files import ANSWER_FLAGS
from h2htalk.settings import BootstrapSettings, GateSettings

QUEUE_COLUMNS: tuple[str, ...] = (
    "model", "variant", "subtask", "id", "reason", "S", "judge_mean", "judge_scores", "J5", "task", "response",
    "reference", "judge_evidence", "human_score", "reviewer", "notes",
)  # fmt: skip


READINGS: tuple[str, ...] = ("J", "S", "judge")  # the values tables.judged_cell can pick


def combine_j(s_score: float, judge_score: float, alpha: float) -> float:
    """J5 (J on 0-5) from S (0-100) and the judge (0-5)."""
    return alpha * (s_score / 20.0) + (1.0 - alpha) * judge_score


def review_reasons(j5: float | None, judge_score: float | None, spread: float | None, gate: GateSettings) -> list[str]:
    """Why an item goes to human review: no usable judge answer, the gated score below tau (J5, or the judge's
    own score: ``gate.gate_on``), or judge samples that disagree."""
    reasons = []
    if j5 is None:
        reasons.append("judge answer unparseable")
    elif gate.gate_on == "J" and j5 < gate.tau:
        reasons.append(f"J5 {j5:.2f} < tau {gate.tau}")
    elif gate.gate_on == "judge" and judge_score is not None and judge_score < gate.tau:
        reasons.append(f"judge {judge_score:.2f} < tau {gate.tau}")
    if spread is not None and spread > gate.max_spread:
        reasons.append(f"judge samples spread {spread:.1f} > {gate.max_spread}")
    return reasons


HumanScores = dict[tuple[str, str, str, str], dict[str, Any]]


def read_human_scores(
    paths: Sequence[str | os.PathLike[str]],
    cells: Sequence[Cell],
    results: Layout,
    judged_models: Collection[str],
    store: str | os.PathLike[str] | None = None,
) -> HumanScores:
    """Scores people gave in filled-in review queues and at the review desk (``store``) for the items of
    ``cells`` (one model's judged cells): (model, variant, subtask, id) -> the median of the item's raters, and
    each rating. Every rating must name an item of this run: a judged model, a judged cell, and, for this model,
    an item it was judged on."""
    model = cells[0].model
    judged = {(c.model, c.variant, c.task, r["id"]) for c in cells for _, r in iter_jsonl(results.judge_samples(c))}
    cell_names = {(c.variant, c.task) for c in cells}

    def check(item: tuple[str, ...]) -> str | None:
        if item[0] not in judged_models:
            return f"model {item[0]!r} is not judged in this run"
        if (item[1], item[2]) not in cell_names:
            return f"{item[1]}/{item[2]} is not a judged cell of this run"
        if item[0] == model and item not in judged:
            return f"item {item[3]!r} of {'/'.join(item[:3])} was not judged"
        return None

    by_item: dict[tuple[str, ...], list[Rating]] = {}
    for rating in read_ratings(paths, REVIEW_SCORES, check, store):
        if rating.item[0] == model:
            by_item.setdefault(rating.item, []).append(rating)
    return {
        item: {
            "score": statistics.median(r.values["human_score"] for r in ratings),
            "ratings": [{**r.source(), "score": r.values["human_score"]} for r in ratings],
        }
        for item, ratings in by_item.items()
    }


def combine_items(
    model: str,
    variant: str,
    subtask: str,
    score_items: Path,
    judgments: Path,
    gate: GateSettings,
    human: HumanScores,
) -> list[dict[str, Any]]:
    s_by_id = {r["id"]: r for _, r in iter_jsonl(score_items)}
    items = []
    for number, verdict in iter_jsonl(judgments):
        item_id = verdict["id"]
        if item_id not in s_by_id:
            raise DataError(f"{judgments}: line {number}: id {item_id!r} has no score")
        s_score = s_by_id[item_id]["S"]  # None: an empty answer not scored (scoring.empty_answers: skip)
        override = human.get((model, variant, subtask, item_id))
        judge_score = override["score"] if override else verdict["judge_mean"]
        j5 = None if judge_score is None or s_score is None else combine_j(s_score, judge_score, gate.alpha)
        # a person decided, or there is no S to mix (nothing a reviewer could change): no review
        gated = not override and s_score is not None
        reasons = review_reasons(j5, judge_score, verdict["judge_spread"], gate) if gated else []
        items.append({
            "id": item_id, "model": model, "variant": variant, "subtask": subtask,
            "task": verdict["task"], "response": verdict["response"], "reference": verdict["reference"],
            "S": s_score, "judge_mean": verdict["judge_mean"], "judge_spread": verdict["judge_spread"],
            "judge_score": judge_score,
            "judge_scores": [s["score"] for s in verdict["samples"]],
            "judge_evidence": next((s["evidence"] for s in verdict["samples"] if s["score"] is not None), ""),
            "human": override, "J5": j5, "J100": None if j5 is None else 20.0 * j5,
            "review": bool(reasons), "review_reasons": reasons,
            "flags": verdict["flags"] + [f for f in s_by_id[item_id].get("flags", []) if f in ANSWER_FLAGS],
        })  # fmt: skip
    return items


def item_readings(item: dict[str, Any]) -> dict[str, float | None]:
    """One item's value under each reading of a judged cell, all on 0-100 (None: that reading has none)."""
    judge = item["judge_score"]
    return {"J": item["J100"], "S": item["S"], "judge": None if judge is None else 20.0 * judge}


def summarise_reading(values: Sequence[float | None], bootstrap: BootstrapSettings) -> dict[str, Any]:
    """Mean of the items' values with a bootstrap CI; items without one are counted as missing, not zeroed."""
    present = np.array([v for v in values if v is not None], dtype=np.float64)
    low, high = bootstrap_mean_ci(present, bootstrap.resamples, bootstrap.seed, bootstrap.confidence)
    mean = (float(present.mean()), float(low[0]), float(high[0])) if present.size else (None, None, None)
    return {"n": int(present.size), **cell_value(*mean), "missing": len(values) - int(present.size)}


def summarise_j(items: Sequence[dict[str, Any]], bootstrap: BootstrapSettings) -> dict[str, Any]:
    """Mean of J100 over items that have a J, with a bootstrap CI (missing ones are counted, not zeroed), and
    every reading of the cell (J, S, judge) the same way."""
    per_item = [item_readings(i) for i in items]
    readings = {name: summarise_reading([r[name] for r in per_item], bootstrap) for name in READINGS}
    return {
        "measure": "J",
        **readings["J"],
        "readings": readings,
        "to_review": sum(i["review"] for i in items),
        "review_share": sum(i["review"] for i in items) / len(items) if items else None,
        "answers": {flag: sum(flag in i["flags"] for i in items) for flag in ANSWER_FLAGS},
        "human_scored": sum(i["human"] is not None for i in items),
    }


def combine_to_files(
    cell: Cell, results: Layout, gate: GateSettings, bootstrap: BootstrapSettings, human: HumanScores
) -> dict[str, Any]:
    """J for every item of a judged cell (people's scores replacing the judge's where imported), the gate, and
    the summary."""
    scores, judgments = Path(results.score_items(cell)), Path(results.judge_samples(cell))
    items = combine_items(cell.model, cell.variant, cell.task, scores, judgments, gate, human)
    write_jsonl_atomic(results.j_items(cell), items)
    summary = {
        **cell.labels(),
        "human_imports": sorted({r["file"] for h in human.values() for r in h["ratings"]}),
        **summarise_j(items, bootstrap),
        "bootstrap": vars(bootstrap),
        "gate": vars(gate),
        "scale": "J5 = alpha*(S/20) + (1-alpha)*J_judge on 0-5; J100 = 20*J5, on S's scale",
    }
    write_json_atomic(results.j_summary(cell), summary)
    return summary


def write_review_queue(item_files: Iterable[Path], out: Path) -> int:
    """Every item sent to review, with what a reviewer needs, as CSV (fill in human_score, 0-5)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(QUEUE_COLUMNS), lineterminator="\n")
    writer.writeheader()
    count = 0
    for path in item_files:
        for _, item in iter_jsonl(path):
            if not item["review"]:
                continue
            writer.writerow({
                "model": item["model"], "variant": item["variant"], "subtask": item["subtask"], "id": item["id"],
                "reason": "; ".join(item["review_reasons"]), "S": f"{item['S']:.2f}",
                "judge_mean": "" if item["judge_mean"] is None else f"{item['judge_mean']:.2f}",
                "judge_scores": " ".join("-" if s is None else f"{s:g}" for s in item["judge_scores"]),
                "J5": "" if item["J5"] is None else f"{item['J5']:.2f}",
                "task": item["task"], "response": item["response"], "reference": item["reference"],
                "judge_evidence": item["judge_evidence"],
                "human_score": "", "reviewer": "", "notes": "",
            })  # fmt: skip
            count += 1
    write_text_atomic(out, buffer.getvalue())
    return count
