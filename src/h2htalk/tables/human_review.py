"""What people's ratings add to the tables: the agreement report (``paper_figures/agreement.{md,csv}``), and the
lines under Table 2 on the review mode and on agreement.

People's ratings come from their CSV files and the review desk's store alike. The report gives Krippendorff's
alpha (``h2htalk.people.agreement``) between raters and between the judge and people: the rubric judge's scores
per judged subtask and over all three (ordinal), the safety study's score (ordinal) and violation (nominal), the
instruction-following verdicts at the desk (need recognised, need met; nominal), people's decisions on
reconstructed instances (nominal; no judge), and the items whose raters tie, each of which needs another rater.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from h2htalk.cells import RunCells
from h2htalk.figures.fig7 import read_need_ratings
from h2htalk.instances.sources import run_notes
from h2htalk.io import iter_jsonl, write_text_atomic
from h2htalk.layout import Cell, Layout
from h2htalk.people.agreement import ALL_JUDGED, BETWEEN_RATERS, COLUMNS, NOMINAL, ORDINAL, compare, note
from h2htalk.people.consensus import Item, consensus, majority, tied
from h2htalk.ratings import (
    INSTANCE_DECISIONS,
    NEED_VERDICTS,
    REVIEW_SCORES,
    SAFETY_RATINGS,
    Rating,
    known_items,
    read_ratings,
)
from h2htalk.settings import GATE, PEOPLE_READINGS, BootstrapSettings
from h2htalk.stages import declared
from h2htalk.stages.declare import stage
from h2htalk.stages.declared import CELLS, RUN_NOTES, config_files, study_cells
from h2htalk.stages.spec import Cells, Done, Labels, Paths, Product, Scope, figure_files
from h2htalk.tables.table3 import agreement as safety_agreement
from h2htalk.tables.table3 import read_safety_ratings
from h2htalk.tabular import Files, markdown_text, records_frame, write_csv

TIE_COLUMNS = ("sheet", "item", "field", "ratings", "values")
NEED_FIELDS = ("recognized", "met")  # what people and the need judge say of an instruction-following answer

JudgeScores = dict[tuple[str, ...], float | None]  # (model, variant, subtask, id) -> the judge's mean


def judged_cells(run: RunCells) -> list[Cell]:
    return [cell for model in run.judged_models for cell in run.judged(model)]


def study_verdicts(run: RunCells, results: Layout, study: str) -> dict[tuple[str, str], Path]:
    """(model, variant) -> the study judge's verdicts of ``study``."""
    cells = [cell for model in run.study_models for cell in run.studies(model, (study,))]
    return {(cell.model, cell.variant): Path(results.verdicts(cell)) for cell in cells}


def rubric_ratings(
    imports: Sequence[str | os.PathLike[str]], run: RunCells, results: Layout, store: str | os.PathLike[str] | None
) -> tuple[list[Rating], JudgeScores]:
    """People's review scores of every judged item of the run (files and the desk's ``store``), and the judge's
    mean score of each item."""
    judge: JudgeScores = {}
    for cell in judged_cells(run):
        for _, verdict in iter_jsonl(results.judge_samples(cell)):
            judge[(cell.model, cell.variant, cell.task, verdict["id"])] = verdict["judge_mean"]
    return read_ratings(imports, REVIEW_SCORES, known_items(judge, "judged item"), store), judge


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


def need_agreement(
    verdict_files: dict[tuple[str, str], Path], ratings: Sequence[Rating], bootstrap: BootstrapSettings
) -> list[dict[str, Any]]:
    """Alpha of the need recognised and the need met (nominal), between raters and between the need judge (the
    majority of its samples that decided; a tie is left out) and people's consensus."""
    samples: dict[Item, list[dict[str, Any]]] = {}
    for (model, variant), path in verdict_files.items():
        for _, verdict in iter_jsonl(path):
            samples[(model, variant, verdict["id"])] = verdict["samples"]
    rows = []
    for field in NEED_FIELDS:
        judge = {item: _decided(s[field] for s in said) for item, said in samples.items()}
        rows += compare("instruction following", field, NOMINAL, ratings, judge, bootstrap)
    return rows


def _decided(values: Iterable[bool | None]) -> bool | None:
    decided = [v for v in values if v is not None]
    return majority(decided) if decided else None


def reads_decisions(config: dict[str, Any]) -> bool:
    """Whether the run has people's decisions on instances to read: files of them, or reconstructed instances
    (the review desk's instance task)."""
    return bool(config["instances"]["review_imports"]) or config["instances"]["source"] == "reconstructed"


def decision_ratings(config: dict[str, Any], run: RunCells, results: Layout) -> list[Rating]:
    """People's keep/drop decisions on reconstructed instances (files and the desk's store), of references of the
    run's subtasks."""
    if not reads_decisions(config):
        return []
    ids = [(r["id"],) for path in curated_files(run, results) for _, r in iter_jsonl(path)]
    imports, store = config["instances"]["review_imports"], config["review"]["store"]
    return read_ratings(imports, INSTANCE_DECISIONS, known_items(ids, "reference"), store)


def curated_files(run: RunCells, results: Layout) -> list[str]:
    return [results.path("curated", subtask=s) for s in run.subtasks]


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


def curated_for_decisions(scope: Scope, labels: Labels) -> list[str]:
    """The curated references, which people's instance decisions name, when there are decisions to read."""
    return curated_files(scope.run, scope.results) if reads_decisions(dict(scope.config)) else []


@stage(
    "agreement", "Krippendorff's alpha between people and between the judges and people",
    reads=(
        *CELLS, *RUN_NOTES, "review.imports", "review.store", "studies.models", "studies.human_ratings",
        "instances.review_imports", "scoring.bootstrap",
    ),
    ratings=(REVIEW_SCORES, SAFETY_RATINGS, NEED_VERDICTS, INSTANCE_DECISIONS), env="figures", memory_mb=1000,
    minutes=10, options=("bootstrap",),
    product=Product("table", "Agreement", "raters and judges against people", main="md", shown=("csv",)),
    inputs={
        "judge_samples": Cells("judge_samples", declared.judged_cells), "review": config_files("review.imports"),
        "verdicts": Cells("verdicts", study_cells()), "safety": config_files("studies.human_ratings"),
        "curated": Paths(curated_for_decisions), "decisions": config_files("instances.review_imports"),
    },
    outputs=figure_files("agreement", csv=".csv", md=".md"),
)  # fmt: skip
def write_agreement_report(
    judge_samples: list[str], review: list[str], verdicts: list[str], safety: list[str], curated: list[str],
    decisions: list[str], config: dict[str, Any], results: Layout, bootstrap: BootstrapSettings,
    outputs: dict[str, str],
) -> Done:  # fmt: skip
    """The run's agreement report (``write_agreement``): alpha rows and tied items of the rubric judge's cells, the
    safety study, instruction following and instance decisions; people's ratings from their files and the review
    desk's store."""
    run, store = RunCells(config), config["review"]["store"]
    ratings, judge = rubric_ratings(review, run, results, store)
    rows = rubric_agreement(ratings, judge, run.judged_subtasks, bootstrap)
    safety_verdicts = study_verdicts(run, results, "safety")
    safety_ratings = read_safety_ratings(safety, safety_verdicts, store)
    rows += safety_agreement(safety_verdicts, safety_ratings, bootstrap)
    need_verdicts = study_verdicts(run, results, "instruction_following")
    needs = read_need_ratings(store, need_verdicts)
    rows += need_agreement(need_verdicts, needs, bootstrap)
    decided = decision_ratings(config, run, results)
    if decided:
        rows += compare("instances", "decision", NOMINAL, decided, None, bootstrap)
    tied_items = ties([
        ("safety ratings", "violation", safety_ratings),
        *(("instruction-following verdicts", field, needs) for field in NEED_FIELDS),
        ("instance decisions", "decision", decided),
    ])  # fmt: skip
    write_agreement(rows, tied_items, outputs, bootstrap.confidence, run_notes(config))
    defined = sum(r["value"] is not None for r in rows)
    return Done(f"{len(rows)} rows ({defined} with an alpha), {len(tied_items)} tied items")


def write_agreement(
    rows: list[dict[str, Any]],
    tied_items: list[dict[str, Any]],
    out: Files,
    confidence: float,
    run_notes: Sequence[str] = (),
) -> None:
    """The ``csv`` file (the alpha rows) and the ``md`` (them, and the items that need another rater);
    ``run_notes`` (what the run is, e.g. a demo) open the notes."""
    write_csv(records_frame(rows, COLUMNS), out["csv"], float_format="{:.4f}")
    shown = [{**r, "alpha": _alpha(r), "CI": _ci(r)} for r in rows]
    columns = ["scope", "field", "level", "comparison", "alpha", "CI", "items", "ratings", "coders"]
    notes = [
        *run_notes,
        f"Krippendorff's alpha with a {confidence:.0%} percentile bootstrap CI (scoring.bootstrap) resampling items "
        "(safety turns: whole scenarios). Ordinal for scores, nominal for violations, needs recognised and met, and "
        "decisions.",
        "Between raters: every rating of every item; an item counts once two people rated it (items, ratings and "
        "coders count those). Judge vs people: the judge's value (the mean of its samples; the majority of them for "
        "violations, and of those that decided for a need recognised or met, a tie left out) against the people's "
        "consensus (the median score, the majority verdict; ties left out), as two coders; ratings: the people's "
        "ratings behind those items.",
        "Ratings: people's files (review.imports, studies.human_ratings, instances.review_imports) and the review "
        "desk's store (review.store); instruction-following verdicts are given at the desk only.",
    ]
    caption = "Agreement between people, and between the judge and people"
    text = markdown_text(records_frame(shown, columns), caption=caption, notes=notes)
    text += "\n## Items that need another rater\n\n"
    if tied_items:
        text += "Their raters tie: such an item has no verdict by people (the judge's stands) until another rater "
        text += "breaks the tie.\n\n" + markdown_text(records_frame(tied_items, TIE_COLUMNS))
    else:
        text += "None: no item's raters tie.\n"
    write_text_atomic(out["md"], text)


def _alpha(row: dict[str, Any]) -> str:
    if row["value"] is not None:
        return f"{row['value']:.2f}"
    if row["items"]:
        return "undefined (no variation)"
    return "none (no item rated twice)" if row["comparison"] == BETWEEN_RATERS else "none (no item rated)"


def _ci(row: dict[str, Any]) -> str:
    low, high = row["value_ci_low"], row["value_ci_high"]
    return "" if low is None else f"[{low:.2f}, {high:.2f}]"


def review_notes(summaries: Iterable[dict[str, Any]], judged_cell: str) -> list[str]:
    """The lines under Table 2 that say how people's scores enter its judged cells as ``judged_cell``
    (tables.judged_cell) reads them, and how many there are."""
    judged = [s for s in summaries if s.get("measure") == "J" and "review_mode" in s]
    if judged and judged_cell not in PEOPLE_READINGS:
        return [
            f"Human review: people's scores enter J and the judge's score, not {judged_cell}, so the judged cells "
            f"here rest on none (tables.judged_cell: {judged_cell}); the J summaries hold what they rest on."
        ]
    shown = "J" if judged_cell == "J" else "score x20"
    notes = []
    for mode in sorted({s["review_mode"] for s in judged}):
        cells = [s for s in judged if s["review_mode"] == mode]
        items, ratings = sum(s["human_items"] for s in cells), sum(s["human_ratings"] for s in cells)
        none = sum(not s["human_items"] for s in cells)
        rests = (
            f"its {len(cells)} judged cells rest on {ratings} ratings by people of {items} items (cells on none: "
            f"{none}; per cell: {{subtask}}_human_items and _human_ratings in the CSV)"
        )
        if mode == GATE:
            notes.append(
                "Human review (review.mode gate, the paper's): every item the gate sends to people takes their score "
                f"(the median of its raters) in place of the judge's; {rests}."
            )
        else:
            size = max(s["review"]["sample_per_cell"] for s in cells)
            alone = sum(s["estimator"] != "prediction-powered J" for s in cells)
            notes.append(
                "Human review (review.mode sample, prediction-powered): a judged cell is the judge's mean "
                f"{shown} over its items with a J plus the mean people-minus-judge difference on a seeded random "
                f"sample of up to {size} of those items, with a normal interval that counts both; {rests}; cells "
                f"with fewer than 2 rated sampled items, which show the judge's {shown} alone: {alone}."
            )
    return notes


def agreement_note(rows: Sequence[dict[str, Any]], confidence: float) -> str:
    """The agreement line under Table 2: the review scores over all judged subtasks (or the one there is)."""
    pooled = [r for r in rows if r["scope"] == ALL_JUDGED] or list(rows)
    return note(pooled, "items", confidence) + " Per subtask: agreement.md."
