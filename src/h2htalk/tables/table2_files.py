"""Write Table 2 and its companions: CSV with CIs, Markdown, LaTeX, heatmap, paper comparison, paper audit."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from h2htalk.cells import RunCells
from h2htalk.config import load_registry
from h2htalk.instances.sources import run_notes
from h2htalk.io import read_json, write_png_atomic, write_text_atomic
from h2htalk.layout import Cell, Layout
from h2htalk.ratings import REVIEW_SCORES
from h2htalk.scoring.signatures import signature_string
from h2htalk.settings import PEOPLE_READINGS, VARIANT_NAMES, WITH_SAP, BootstrapSettings, JudgeMode
from h2htalk.stages.declare import stage
from h2htalk.stages.declared import (
    CELLS,
    EARLY,
    REGISTRY,
    RUBRIC_JUDGE_MODE,
    RUN_NOTES,
    config_files,
    judged_cells,
    registry_files,
    rubric_ladders,
    summaries,
)  # fmt: skip
from h2htalk.stages.spec import Cells, Done, Each, Figure, One, Paths, Product, Scope, figure_files
from h2htalk.subtasks import SUBTASKS
from h2htalk.tables.table2 import (
    CAPTION,
    LABEL,
    NOTES,
    PENDING,
    Row,
    answer_notes,
    audit_paper,
    build_rows,
    cascade_notes,
    ci_frame,
    column_names,
    column_order,
    comparison,
    judged_note,
    mark_judged,
    read_paper_table2,
    table2_frame,
    table2_marks,
)
from h2htalk.tabular import Files, markdown_text, records_frame, write_csv, write_table

TABLE2 = (
    *CELLS, *RUN_NOTES, *REGISTRY, "paper.table2", "tables", "instances.reconstruct.generator",
    "instances.reconstruct.voters", "review.imports", "review.store", "scoring.bootstrap",
    "judge_reliability.every_run", *RUBRIC_JUDGE_MODE,
)  # fmt: skip
COMPARISON_COLUMNS = ("model", "embedder", "variant", "column", "ours", "paper", "difference")
AUDIT_COLUMNS = ("model", "column", "reported", "recomputed", "weights", "difference")


def heatmap(rows: list[Row], path: Path, judged_cell: str, notes: Iterable[str] = ()) -> None:
    """The table as a heatmap, headed by the paper's names; ``notes`` (e.g. the demo note) under its title."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    columns = column_order()
    data = np.array([[row.values().get(c, np.nan) for c in columns] for row in rows], dtype=float)
    labels = [
        f"{r.display_name} [{VARIANT_NAMES.get(r.variant, r.variant)}]"
        + (f" ({r.embedder})" if len({x.embedder for x in rows}) > 1 else "")
        for r in rows
    ]
    height = max(2.5, 0.35 * len(rows) + 1.6)
    fig, ax = plt.subplots(figsize=(14, height))
    image = ax.imshow(data, aspect="auto", cmap="viridis")
    names = column_names()
    ax.set_xticks(range(len(columns)), labels=[names[c] for c in columns], rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(len(rows)), labels=labels, fontsize=8)
    for i in range(data.shape[0]):
        for j in range(data.shape[1]):
            if not np.isnan(data[i, j]):
                ax.text(
                    j,
                    i,
                    f"{data[i, j]:.1f}",
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white" if data[i, j] < np.nanmean(data) else "black",
                )
    fig.colorbar(image, ax=ax, label="score (0-100)")
    title = f"Table 2: scores by model and subtask (S; {judged_cell} for Levels I-III when judged)"
    ax.set_title("\n".join([title, *notes]))
    fig.tight_layout()
    write_png_atomic(fig, path, dpi=130)
    plt.close(fig)


def signature_notes(summaries: Iterable[dict[str, Any]]) -> list[str]:
    """The score settings under the table: tokens, ROUGE measure, empty answers, embedder (every distinct
    signature once)."""
    signatures = {signature_string(summary["signature"]) for summary in summaries if "signature" in summary}
    return [f"Scores: {text}." for text in sorted(signatures)]


def pending_summary(summary: dict[str, Any]) -> dict[str, Any]:
    """A judged cell's place in the partial Table 2: its S summary's identity, marked pending (no value)."""
    keys = ("model", "variant", "subtask", "embedder")
    return {**{key: summary[key] for key in keys}, "measure": PENDING, "pending": True}


@stage(
    "table2_partial",
    "Table 2 from the scores alone, before the judge: its judged cells pending, every other cell final",
    reads=(*CELLS, *RUN_NOTES, *REGISTRY, "tables"), cells=lambda run, w: run.table2(), priority=EARLY,
    env="figures", memory_mb=1000, minutes=10,
    product=Product("table", "Table 2 so far", "Table 2 before the judge: its judged cells pending", main="md",
                    listed=False),
    inputs={"summaries": Each("score_summary"), "registry": Paths(registry_files)},
    outputs=figure_files("table2_partial", csv=".csv", md=".md"),
)  # fmt: skip
def write_table2_partial(
    summaries: list[str], registry: list[str], cells: list[Cell], config: dict[str, Any], run: RunCells, outputs: Files
) -> Done:
    """Table 2 as far as the scores go (``csv`` and ``md``), before the judge: what a run stopped before its judge
    keeps. Its judged cells, and the averages and Overall built from them, say pending; every other cell is the
    final table's."""
    read = [pending_summary(read_json(path)) if run.is_judged(cell) else read_json(path)
            for cell, path in zip(cells, summaries, strict=True)]  # fmt: skip
    tables = config["tables"]
    rows = build_rows(read, load_registry(registry), tables["overall_weights"], tables["judged_cell"])
    write_csv(ci_frame(rows), outputs["csv"], float_format="{:.4f}")
    pending = sum(s.get("pending", False) for s in read)
    notes = [
        *run_notes(config),
        f"Partial: the {pending} judged cells (Levels I-III) are pending until the rubric judge has run, and so are "
        "their dimension's average and Overall; the other cells are final. The whole table is table2.md.",
        *NOTES,
        *answer_notes(rows),
        *signature_notes(read),
    ]
    write_text_atomic(outputs["md"], markdown_text(table2_frame(rows), caption=CAPTION, notes=notes))
    return Done(f"{len(read)} cells, {pending} pending the judge")


def _rubric_canary(scope: Scope, labels: dict[str, str]) -> list[str]:
    """Table 2 notes a changed rubric judge from its drift canary, when every run checks it."""
    if not (scope.config["judge_reliability"]["every_run"] and scope.run.judged_subtasks):
        return []
    return [scope.results.path("judge_canary", model=scope.config["rubric_judge"]["model"], part="rubric")]


@stage(
    "table2", "Table 2, its heatmap, the paper comparison and audit", reads=TABLE2,
    entries=lambda s, w: list(s.run.run_models), ratings=(REVIEW_SCORES,), env="figures", memory_mb=1000,
    minutes=10, options=("bootstrap",),
    product=Product("table", "Table 2", "scores per model, variant and subtask (S; J where judged)", main="md",
                    shown=("csv", "heatmap"), first=True),
    inputs={
        "summaries": Paths(summaries), "registry": Paths(registry_files),
        "paper": config_files("paper.table2"), "review": One("review_queue"),
        "pairs": Figure("table2_pairs", ".csv"), "ranks": Figure("table2_ranks", ".csv"),
        "judge_samples": Cells("judge_samples", judged_cells),
        "human": config_files("review.imports"), "canary": Paths(_rubric_canary),
        "ladders": Paths(rubric_ladders),
    },
    outputs=figure_files(
        "table2", csv=".csv", md=".md", tex=".tex", heatmap="_heatmap.png", vs_paper="_vs_paper.csv",
        audit="_paper_audit.csv",
    ),
)  # fmt: skip
def write_table2(
    summaries: list[str], registry: list[str], paper: list[str], review: str, pairs: str, ranks: str,
    judge_samples: list[str], human: list[str], canary: list[str], ladders: list[str],
    config: dict[str, Any], run: RunCells, results: Layout, bootstrap: BootstrapSettings, outputs: dict[str, str],
) -> Done:  # fmt: skip
    """The run's Table 2 and its companions, Overall weighted by tables.overall_weights and judged cells read as
    tables.judged_cell says, with every note its run calls for: what the run is (also on the heatmap), the models in
    two roles, the drift ``canary``, people's review, the reconstruction's echo, which rows can be told apart
    (``pairs``, ``ranks``: their marks and rank intervals), the rubric judge's agreement with people and its standing
    on its ``ladders``."""
    from h2htalk.reliability.canary import drift_notes
    from h2htalk.reliability.standing import AT_CHANCE_MARK, rubric_standings, standing_notes
    from h2htalk.tables.calibration import echo_notes, no_answer_notes
    from h2htalk.tables.human_review import agreement_note, review_notes, rubric_agreement, rubric_ratings
    from h2htalk.tables.table2_significance import Significance

    weights, judged_cell = config["tables"]["overall_weights"], config["tables"]["judged_cell"]
    (paper_file,) = paper
    read = [read_json(path) for path in summaries]
    rows = build_rows(read, load_registry(registry), weights, judged_cell)
    judged = [s for s in read if "readings" in s]
    said = run_notes(config)  # what the run is: under the table and on the heatmap
    notes = [*said, *NOTES]
    if judged:
        notes.append(judged_note(judged_cell, [s["gate"]["alpha"] for s in judged]))
    notes += [*cascade_notes(judged, judged_cell), *answer_notes(rows), *no_answer_notes(read), *shared_roles(config)]
    notes += [note for path in canary if os.path.exists(path) for note in drift_notes(path)]
    notes += review_notes(read, judged_cell)
    if config["instances"]["source"] == "reconstructed":
        notes += echo_notes(read, weights, judged_cell)
    significance = None  # the workflow always compares; on its own, table2 says when nothing was compared
    if os.path.isfile(pairs) and os.path.isfile(ranks):
        significance = Significance.read(pairs, ranks)
    else:
        notes.append("No paired comparisons: which rows can be told apart is in table2_pairs (h2htalk table2-pairs).")
    if run.judged_subtasks:
        ratings, judge = rubric_ratings(human, run, results, config["review"]["store"])
        agreement = rubric_agreement(ratings, judge, run.judged_subtasks, bootstrap)
        notes.append(agreement_note(agreement, bootstrap.confidence))
    standings = rubric_standings(config, results, ladders, bootstrap) if judged_cell in PEOPLE_READINGS else []
    notes += standing_notes(standings, "Levels I-III cells, and the Itinerary Avg and Overall built from them,")
    notes += signature_notes(read)
    write_csv(ci_frame(rows), outputs["csv"], float_format="{:.4f}")
    frame = table2_frame(rows)
    if significance is not None:
        frame = significance.annotate(frame, rows)
        notes += significance.notes(rows)
    if any(s.unshown and s.deciding for s in standings):
        frame = mark_judged(frame, rows, AT_CHANCE_MARK)
    write_table(frame, outputs, caption=CAPTION, label=LABEL, notes=notes, marks=table2_marks(rows), csv=False)
    heatmap(rows, Path(outputs["heatmap"]), judged_cell, said)
    paper_rows = read_paper_table2(paper_file)
    compared = comparison(rows, paper_rows, WITH_SAP)
    # These two CSVs write numbers as Python does (float_format "{}"; already rounded to 4 decimals).
    write_csv(records_frame(compared, COMPARISON_COLUMNS), outputs["vs_paper"], float_format="{}")
    counts = {
        "paper Table 1 counts": {s.key: s.paper_count for s in SUBTASKS},
        "released counts": {s.key: s.released for s in SUBTASKS},
    }
    write_csv(records_frame(audit_paper(paper_rows, counts), AUDIT_COLUMNS), outputs["audit"], float_format="{}")
    return Done(f"{len(summaries)} cells")


def shared_roles(config: dict[str, Any]) -> list[str]:
    """Notes for Table 2 when a model under test also wrote, voted on or judged what it is scored on (the judge
    only where its scores are in the table: tables.judged_cell), or when the baselines' judged cells are S."""
    notes = []
    reconstruct = config["instances"]["reconstruct"]
    if config["instances"]["source"] == "reconstructed":
        for role, names in (("wrote the inputs", [reconstruct["generator"]]), ("voted on them", reconstruct["voters"])):
            for name in dict.fromkeys(names):
                if name in config["models"]:
                    notes.append(f"{name} is a model under test and also {role} (instance reconstruction).")
    judge, reading = config["rubric_judge"], config["tables"]["judged_cell"]
    if judge["model"] in config["models"] and reading != "S":  # with S the judge's scores are not in the table
        notes.append(f"{judge['model']} is a model under test and also the rubric judge of Levels I-III.")
    mode = JudgeMode.from_config(config, "rubric_judge")
    if mode.cascade and mode.cheap_model in config["models"] and reading != "S":
        notes.append(
            f"{mode.cheap_model} is a model under test and also the cheap rubric judge of Levels I-III (cascade"
            " mode): a preference for its own answers is a bias of one row, which its cells' sample corrects."
        )
    if config["baselines"] and not judge["baselines"] and reading != "S":
        notes.append(
            f"The baselines' Level I-III cells are S, not {reading}: they are not judged (rubric_judge.baselines)."
        )
    return notes
