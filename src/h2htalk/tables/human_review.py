"""What people's ratings add to the tables: the agreement report (``paper_figures/agreement.{md,csv}``), and the
lines under Table 2 on the review mode and on agreement.

The report gives Krippendorff's alpha (``h2htalk.people.agreement``) between raters and between the judge and
people: the rubric judge's scores per judged subtask and over all three (ordinal), the safety study's score
(ordinal) and violation (nominal), people's decisions on reconstructed instances (nominal; no judge), and the
items whose raters tie, each of which needs another rater. Instruction following has no sheet people fill in,
so it has no rows.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from h2htalk.cells import RunCells
from h2htalk.io import iter_jsonl, write_text_atomic
from h2htalk.layout import Cell, Layout
from h2htalk.people.agreement import BETWEEN_RATERS, NOMINAL, ORDINAL, compare, note
from h2htalk.people.consensus import consensus, majority, tied
from h2htalk.ratings import INSTANCE_DECISIONS, REVIEW_SCORES, Rating, known_items, read_ratings
from h2htalk.settings import BootstrapSettings
from h2htalk.tables.table3 import agreement as safety_agreement
from h2htalk.tables.table3 import read_safety_ratings
from h2htalk.tabular import markdown_text, records_frame, write_csv

ALL_JUDGED = "judged subtasks"  # the scope of the rows over every judged subtask
COLUMNS = (
    "scope", "field", "level", "comparison", "value", "value_ci_low", "value_ci_high", "measure", "items", "ratings",
    "coders",
)  # fmt: skip
TIE_COLUMNS = ("sheet", "item", "field", "ratings", "values")

JudgeScores = dict[tuple[str, ...], float | None]  # (model, variant, subtask, id) -> the judge's mean


def judged_cells(run: RunCells) -> list[Cell]:
    return [cell for model in run.judged_models for cell in run.judged(model)]


def safety_verdicts(run: RunCells, results: Layout) -> dict[tuple[str, str], Path]:
    """(model, variant) -> the safety judge's verdicts."""
    cells = [cell for model in run.study_models for cell in run.studies(model, ("safety",))]
    return {(cell.model, cell.variant): Path(results.verdicts(cell)) for cell in cells}


def rubric_ratings(
    imports: Sequence[str | os.PathLike[str]], run: RunCells, results: Layout
) -> tuple[list[Rating], JudgeScores]:
    """People's review scores of every judged item of the run, and the judge's mean score of each item."""
    judge: JudgeScores = {}
    for cell in judged_cells(run):
        for _, verdict in iter_jsonl(results.judge_samples(cell)):
            judge[(cell.model, cell.variant, cell.task, verdict["id"])] = verdict["judge_mean"]
    return read_ratings(imports, REVIEW_SCORES, known_items(judge, "judged item")), judge


def rubric_agreement(
    ratings: Sequence[Rating], judge: JudgeScores, subtasks: Sequence[str], bootstrap: BootstrapSettings
) -> list[dict[str, Any]]:
    """Alpha of the review scores (ordinal) per judged subtask, then over all of them."""
    rows = []
    for subtask in subtasks:
        mine = [r for r in ratings if r.item[2] == subtask]
        scores = {item: value for item, value in judge.items() if item[2] == subtask}
        rows += compare(subtask, "human_score", ORDINAL, mine, scores, bootstrap)
    if len(subtasks) > 1:
        rows += compare(ALL_JUDGED, "human_score", ORDINAL, ratings, judge, bootstrap)
    return rows


def decision_ratings(imports: Sequence[str | os.PathLike[str]], run: RunCells, results: Layout) -> list[Rating]:
    """People's keep/drop decisions on reconstructed instances, of references of the run's subtasks."""
    if not imports:
        return []
    ids = [(r["id"],) for path in curated_files(run, results) for _, r in iter_jsonl(path)]
    return read_ratings(imports, INSTANCE_DECISIONS, known_items(ids, "reference"))


def curated_files(run: RunCells, results: Layout) -> list[str]:
    return [results.path("curated", subtask=s) for s in run.subtasks]


def report_inputs(config: dict[str, Any], results: Layout) -> list[str]:
    """Every file the agreement report reads."""
    run = RunCells(config)
    paths = [results.judge_samples(cell) for cell in judged_cells(run)]
    paths += [str(path) for path in safety_verdicts(run, results).values()]
    paths += [*config["review"]["imports"], *config["studies"]["human_ratings"]]
    if config["instances"]["review_imports"]:
        paths += [*curated_files(run, results), *config["instances"]["review_imports"]]
    return paths


def ties(sheets: Iterable[tuple[str, str, Sequence[Rating]]]) -> list[dict[str, Any]]:
    """Items whose raters tie on a category, per (sheet, field, ratings): each needs another rater."""
    rows = []
    for sheet, field, ratings in sheets:
        found = consensus(ratings, field, majority)
        for item in tied(found):
            given = [r.values[field] for r in found[item].ratings]
            rows.append({
                "sheet": sheet, "item": "/".join(item), "field": field, "ratings": len(given),
                "values": " ".join(sorted(map(_shown, given))),
            })  # fmt: skip
    return rows


def _shown(value: Any) -> str:
    return {True: "yes", False: "no"}.get(value, str(value)) if isinstance(value, bool) else str(value)


def agreement_report(
    config: dict[str, Any], results: Layout, bootstrap: BootstrapSettings
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(alpha rows, tied items) of the run: the rubric judge's cells, the safety study, instance decisions."""
    run = RunCells(config)
    ratings, judge = rubric_ratings(config["review"]["imports"], run, results)
    rows = rubric_agreement(ratings, judge, run.judged_subtasks, bootstrap)
    verdicts = safety_verdicts(run, results)
    safety = read_safety_ratings(config["studies"]["human_ratings"], verdicts)
    rows += safety_agreement(verdicts, safety, bootstrap)
    decisions = decision_ratings(config["instances"]["review_imports"], run, results)
    if decisions:
        rows += compare("instances", "decision", NOMINAL, decisions, None, bootstrap)
    tied_items = ties([("safety ratings", "violation", safety), ("instance decisions", "decision", decisions)])
    return rows, tied_items


def write_agreement(rows: list[dict[str, Any]], tied_items: list[dict[str, Any]], prefix: Path, confidence: float):
    """``prefix``.csv (the alpha rows) and ``prefix``.md (them, and the items that need another rater)."""
    write_csv(records_frame(rows, COLUMNS), prefix.with_suffix(".csv"), float_format="{:.4f}")
    shown = [{**r, "alpha": _alpha(r), "CI": _ci(r)} for r in rows]
    columns = ["scope", "field", "level", "comparison", "alpha", "CI", "items", "ratings", "coders"]
    notes = [
        f"Krippendorff's alpha with a {confidence:.0%} percentile bootstrap CI (scoring.bootstrap) resampling items "
        "(safety turns: whole scenarios). Ordinal for scores, nominal for violations and decisions.",
        "Between raters: every rating of every item; an item counts once two people rated it (items, ratings and "
        "coders count those). Judge vs people: the judge's value (the mean of its samples; the majority of them for "
        "violations) against the people's consensus (the median score, the majority verdict; ties left out), as "
        "two coders; ratings: the people's ratings behind those items.",
        "Instruction following has no sheet people fill in, so it has no rows here.",
    ]
    caption = "Agreement between people, and between the judge and people"
    text = markdown_text(records_frame(shown, columns), caption=caption, notes=notes)
    text += "\n## Items that need another rater\n\n"
    if tied_items:
        text += "Their raters tie: such an item has no verdict by people (the judge's stands) until another rater "
        text += "breaks the tie.\n\n" + markdown_text(records_frame(tied_items, TIE_COLUMNS))
    else:
        text += "None: no item's raters tie.\n"
    write_text_atomic(prefix.with_suffix(".md"), text)


def _alpha(row: dict[str, Any]) -> str:
    if row["value"] is not None:
        return f"{row['value']:.2f}"
    if row["items"]:
        return "undefined (no variation)"
    return "none (no item rated twice)" if row["comparison"] == BETWEEN_RATERS else "none (no item rated)"


def _ci(row: dict[str, Any]) -> str:
    low, high = row["value_ci_low"], row["value_ci_high"]
    return "" if low is None else f"[{low:.2f}, {high:.2f}]"


def review_notes(summaries: Iterable[dict[str, Any]]) -> list[str]:
    """The lines under Table 2 that say how people's scores enter its judged cells, and how many there are."""
    judged = [s for s in summaries if s.get("measure") == "J" and "review_mode" in s]
    notes = []
    for mode in sorted({s["review_mode"] for s in judged}):
        cells = [s for s in judged if s["review_mode"] == mode]
        items, ratings = sum(s["human_items"] for s in cells), sum(s["human_ratings"] for s in cells)
        none = sum(not s["human_items"] for s in cells)
        rests = (
            f"its {len(cells)} judged cells rest on {ratings} ratings by people of {items} items (cells on none: "
            f"{none}; per cell: {{subtask}}_human_items and _human_ratings in the CSV)"
        )
        if mode == "gate":
            notes.append(
                "Human review (review.mode gate, the paper's): every item the gate sends to people takes their score "
                f"(the median of its raters) in place of the judge's; {rests}."
            )
        else:
            size = max(s["review"]["sample_per_cell"] for s in cells)
            alone = sum(s["estimator"] != "prediction-powered J" for s in cells)
            notes.append(
                "Human review (review.mode sample, prediction-powered): a judged cell is the judge's mean J over all "
                f"its items plus the mean people-minus-judge difference on a seeded random sample of up to {size} "
                "of its items, with a normal interval that counts both; "
                f"{rests}; cells with fewer than 2 rated sampled items, which show the judge's J alone: {alone}."
            )
    return notes


def agreement_note(rows: Sequence[dict[str, Any]], confidence: float) -> str:
    """The agreement line under Table 2: the review scores over all judged subtasks (or the one there is)."""
    pooled = [r for r in rows if r["scope"] == ALL_JUDGED] or list(rows)
    return note(pooled, "items", confidence) + " Per subtask: agreement.md."
