"""Table commands: table1, table2 and its paired comparisons, table3 (the SAP ablation), agreement (people and
judges), calibration."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from h2htalk.cli.options import (
    REGISTRY_READS,
    InFigures,
    add_bootstrap,
    add_command,
    add_results,
    add_table_output,
    load_config,
    write_meta,
)
from h2htalk.cli.run_notes import RUN_NOTE_READS, run_notes
from h2htalk.config import registry_files
from h2htalk.layout import Layout
from h2htalk.progress import summary

PAIRS, RANKS = "table2_pairs", "table2_ranks"  # in the tables folder

CELLS_READS = ("models", "baselines", "rubric_judge.baselines", "subtasks", "variants", "scoring.embedders")
TABLE2_READS = (
    *CELLS_READS, *RUN_NOTE_READS, *REGISTRY_READS, "paper.table2", "tables", "instances.reconstruct.generator",
    "instances.reconstruct.voters", "rubric_judge.model", "review.imports", "review.store", "scoring.bootstrap",
    "judge_reliability.every_run",
)  # fmt: skip
AGREEMENT_READS = (
    *CELLS_READS, *RUN_NOTE_READS, "review.imports", "review.store", "studies.models", "studies.human_ratings",
    "instances.review_imports", "scoring.bootstrap",
)  # fmt: skip


def register(sub: Any) -> None:
    p = add_command(sub, "table1", cmd_table1, "Table 1 (.csv, .md, .tex) from the curation reports", ("subtasks",))
    add_results(p)
    add_table_output(p, "table1")

    p = add_command(sub, "table2", cmd_table2, "Table 2, its heatmap, the paper comparison and audit", TABLE2_READS)
    add_results(p)
    add_bootstrap(p)
    add_table_output(p, "table2")
    pairs, ranks = InFigures(f"{PAIRS}.csv"), InFigures(f"{RANKS}.csv")
    p.add_argument("--pairs", type=Path, default=pairs, help=f"the paired comparisons to mark ({pairs})")
    p.add_argument("--ranks", type=Path, default=ranks, help=f"the rank intervals to show ({ranks})")

    p = add_command(
        sub, "table2-pairs", cmd_table2_pairs,
        "Table 2's paired comparisons, rank intervals and detectable differences, and the rank figure",
        reads=(*TABLE2_READS, "scoring.bootstrap"),
    )  # fmt: skip
    add_results(p)
    add_bootstrap(p)
    add_table_output(p, PAIRS)
    p.add_argument(
        "--ranks-out", type=Path, default=InFigures(RANKS),
        help=f"the rank intervals' path without extension (.csv and the figure's .png; {InFigures(RANKS)})",
    )  # fmt: skip

    p = add_command(
        sub, "table3", cmd_table3, "Table 3: the SAP ablation with paired bootstrap CIs and the paper's rows",
        reads=(
            "scoring", "studies.models", "studies.human_ratings", "paper.table3", "models", "variants", "review.store",
            *RUN_NOTE_READS,
        ),
    )  # fmt: skip
    add_results(p)
    add_bootstrap(p)
    add_table_output(p, "table3")

    p = add_command(
        sub, "agreement", cmd_agreement, "Krippendorff's alpha between people and between the judges and people",
        reads=AGREEMENT_READS,
    )  # fmt: skip
    add_results(p)
    add_bootstrap(p)
    add_table_output(p, "agreement")

    p = add_command(
        sub, "calibration", cmd_calibration, "chance floor, oracle, rescaled scores and unrelated-pair SS",
        reads=(*CELLS_READS, *RUN_NOTE_READS, "tables.judged_cell"),
    )  # fmt: skip
    add_results(p)
    add_table_output(p, "calibration")


def cmd_table1(args: argparse.Namespace) -> int:
    from h2htalk.tables.table1 import write_table1

    reports = [args.results.path("curation", subtask=key) for key in load_config(args)["subtasks"]]
    write_table1(reports, args.out)
    write_meta(args, reports)
    summary(f"{len(reports)} subtasks", out=f"{args.out}.md (+ .csv .tex)")
    return 0


def cmd_table2(args: argparse.Namespace) -> int:
    from h2htalk.cells import RunCells
    from h2htalk.io import read_json
    from h2htalk.reliability.canary import drift_notes
    from h2htalk.settings import BootstrapSettings
    from h2htalk.tables.calibration import echo_notes
    from h2htalk.tables.human_review import agreement_note, judged_cells, review_notes, rubric_agreement, rubric_ratings
    from h2htalk.tables.table2_files import write_table2
    from h2htalk.tables.table2_significance import Significance

    config = load_config(args)
    run, bootstrap = RunCells(config), BootstrapSettings.from_config(config)
    summaries = run.table2_summaries(args.results)
    registry, paper = registry_files(config), config["paper"]["table2"]
    weights, judged_cell = config["tables"]["overall_weights"], config["tables"]["judged_cell"]
    imports, store = config["review"]["imports"], config["review"]["store"]
    canary = rubric_canary(config, args.results)
    notes = shared_roles(config) + (drift_notes(canary) if canary else [])
    notes += review_notes(map(read_json, summaries), judged_cell)
    if config["instances"]["source"] == "reconstructed":
        notes += echo_notes(map(read_json, summaries), weights, judged_cell)
    significance = None  # the workflow always compares; on its own, table2 says when nothing was compared
    if args.pairs.is_file() and args.ranks.is_file():
        significance = Significance.read(args.pairs, args.ranks)
    else:
        notes.append("No paired comparisons: which rows can be told apart is in table2_pairs (h2htalk table2-pairs).")
    if run.judged_subtasks:
        ratings, judge = rubric_ratings(imports, run, args.results, store)
        rows = rubric_agreement(ratings, judge, run.judged_subtasks, bootstrap)
        notes.append(agreement_note(rows, bootstrap.confidence))
    write_table2(
        summaries,
        registry,
        paper,
        args.out,
        weights,
        judged_cell,
        notes=notes,
        run_notes=run_notes(config),
        significance=significance,
    )
    samples = [args.results.judge_samples(cell) for cell in judged_cells(run)]
    stored = [store] if os.path.exists(store) else []
    compared = [args.pairs, args.ranks] if significance else []
    canaries = [canary] if canary else []
    write_meta(args, [*summaries, *registry, paper, *compared, *samples, *imports, *stored, *canaries])
    summary(f"{len(summaries)} cells", out=f"{args.out}.md (+ .csv .tex _heatmap.png _vs_paper.csv _paper_audit.csv)")
    return 0


def cmd_table2_pairs(args: argparse.Namespace) -> int:
    from h2htalk.cells import RunCells
    from h2htalk.config import load_registry
    from h2htalk.settings import BootstrapSettings
    from h2htalk.tables.table2_pairs import compare_rows
    from h2htalk.tables.table2_pairs_files import read_row_items, write_comparisons

    config = load_config(args)
    registry = load_registry(registry_files(config))
    rows, items = read_row_items(RunCells(config), args.results, registry, config["tables"]["judged_cell"])
    comparisons = compare_rows(rows, config["tables"]["overall_weights"], BootstrapSettings.from_config(config))
    write_comparisons(comparisons, args.out, args.ranks_out)
    write_meta(args, [*items, *registry_files(config)])
    told = sum(bool(r["separable"]) for r in comparisons.pairs)
    compared = f"{len(comparisons.pairs)} comparisons, {told} separable"
    summary(compared, out=f"{args.out}.csv (+ {Path(args.ranks_out).name}.csv .png)")
    return 0


def cmd_table3(args: argparse.Namespace) -> int:
    from h2htalk.cells import RunCells
    from h2htalk.settings import BootstrapSettings
    from h2htalk.tables.table3 import write_table3_files

    config = load_config(args)
    run = RunCells(config)
    cells = [cell.scored_by(run.embedder) for m in run.study_models for cell in run.studies(m, ("safety",))]
    human, paper, store = config["studies"]["human_ratings"], config["paper"]["table3"], config["review"]["store"]
    bootstrap = BootstrapSettings.from_config(config)
    rows = write_table3_files(cells, args.results, paper, human, bootstrap, args.out, store, run_notes(config))
    inputs = [path for cell in cells for path in (args.results.score_items(cell), args.results.verdicts(cell))]
    write_meta(args, [*inputs, paper, *human, *([store] if os.path.exists(store) else [])])
    summary(f"{len(rows)} rows", out=f"{args.out}.md (+ .csv .tex)")
    return 0


def cmd_agreement(args: argparse.Namespace) -> int:
    from h2htalk.settings import BootstrapSettings
    from h2htalk.tables.human_review import agreement_report, report_inputs, write_agreement

    config = load_config(args)
    bootstrap = BootstrapSettings.from_config(config)
    rows, tied = agreement_report(config, args.results, bootstrap)
    write_agreement(rows, tied, args.out, bootstrap.confidence, run_notes(config))
    write_meta(args, report_inputs(config, args.results))
    defined = sum(r["value"] is not None for r in rows)
    summary(f"{len(rows)} rows ({defined} with an alpha), {len(tied)} tied items", out=f"{args.out}.md (+ .csv)")
    return 0


def cmd_calibration(args: argparse.Namespace) -> int:
    from h2htalk.cells import RunCells
    from h2htalk.layout import Cell
    from h2htalk.tables.calibration import FLOOR, write_calibration

    config = load_config(args)
    run, results = RunCells(config), args.results
    summaries = run.table2_summaries(results)
    floor_items = {
        e: [results.score_items(Cell(FLOOR, run.variants[0], s, e)) for s in run.subtasks] for e in run.embedders
    }
    rows = write_calibration(summaries, floor_items, args.out, config["tables"]["judged_cell"], run_notes(config))
    write_meta(args, [*summaries, *(p for paths in floor_items.values() for p in paths)])
    summary(f"{len(rows)} rows", out=f"{args.out}.md (+ .csv)")
    return 0


def rubric_canary(config: dict[str, Any], results: Layout) -> str | None:
    """The rubric judge's drift canary, when every run checks it (judge_reliability.every_run), Levels I-III are
    judged and its ladder job has run (the workflow makes it an input of Table 2)."""
    from h2htalk.cells import RunCells

    if not (config["judge_reliability"]["every_run"] and RunCells(config).judged_subtasks):
        return None
    path = results.path("judge_canary", model=config["rubric_judge"]["model"])
    return path if os.path.exists(path) else None


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
    if config["baselines"] and not judge["baselines"] and reading != "S":
        notes.append(
            f"The baselines' Level I-III cells are S, not {reading}: they are not judged (rubric_judge.baselines)."
        )
    return notes
