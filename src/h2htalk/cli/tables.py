"""Table commands: table1, table2, table3 (the SAP ablation), calibration."""

from __future__ import annotations

import argparse
import os
from typing import Any

from h2htalk.cli.options import add_bootstrap, add_command, add_results, add_table_output, load_config, write_meta
from h2htalk.cli.run_notes import RUN_NOTE_READS, run_notes
from h2htalk.layout import Layout
from h2htalk.progress import summary

CELLS_READS = ("models", "baselines", "rubric_judge.baselines", "subtasks", "variants", "scoring.embedders")
TABLE2_READS = (
    *CELLS_READS, *RUN_NOTE_READS, "model_registry", "paper.table2", "tables", "instances.reconstruct.generator",
    "instances.reconstruct.voters", "rubric_judge.model", "judge_reliability.every_run",
)  # fmt: skip


def register(sub: Any) -> None:
    p = add_command(sub, "table1", cmd_table1, "Table 1 (.csv, .md, .tex) from the curation reports", ("subtasks",))
    add_results(p)
    add_table_output(p, "paper_figures/table1")

    p = add_command(sub, "table2", cmd_table2, "Table 2, its heatmap, the paper comparison and audit", TABLE2_READS)
    add_results(p)
    add_table_output(p, "paper_figures/table2")

    p = add_command(
        sub, "table3", cmd_table3, "Table 3: the SAP ablation with paired bootstrap CIs and the paper's rows",
        reads=(
            "scoring", "studies.models", "studies.human_ratings", "paper.table3", "models", "variants", "review.store",
            *RUN_NOTE_READS,
        ),
    )  # fmt: skip
    add_results(p)
    add_bootstrap(p)
    add_table_output(p, "paper_figures/table3")

    p = add_command(
        sub, "calibration", cmd_calibration, "chance floor, oracle, rescaled scores and unrelated-pair SS",
        reads=(*CELLS_READS, *RUN_NOTE_READS, "tables.judged_cell"),
    )  # fmt: skip
    add_results(p)
    add_table_output(p, "paper_figures/calibration")


def cmd_table1(args: argparse.Namespace) -> int:
    from h2htalk.tables.table1 import write_table1

    reports = [args.results.path("curation", subtask=key) for key in load_config(args)["subtasks"]]
    write_table1(reports, args.out)
    write_meta(args, reports)
    summary(f"wrote {args.out}.csv, .md, .tex")
    return 0


def cmd_table2(args: argparse.Namespace) -> int:
    from h2htalk.cells import RunCells
    from h2htalk.reliability.canary import drift_notes
    from h2htalk.tables.table2_files import write_table2

    config = load_config(args)
    summaries = RunCells(config).table2_summaries(args.results)
    registry, paper = config["model_registry"], config["paper"]["table2"]
    weights, judged_cell = config["tables"]["overall_weights"], config["tables"]["judged_cell"]
    canary = rubric_canary(config, args.results)
    write_table2(
        summaries,
        registry,
        paper,
        args.out,
        weights,
        judged_cell,
        notes=shared_roles(config) + (drift_notes(canary) if canary else []),
        run_notes=run_notes(config),
    )
    write_meta(args, [*summaries, registry, paper, *([canary] if canary else [])])
    summary(f"wrote {args.out}.csv, .md, .tex, _heatmap.png, _vs_paper.csv, _paper_audit.csv")
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
    summary(f"{len(rows)} rows -> {args.out}.csv, .md, .tex")
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
    summary(f"{len(rows)} rows -> {args.out}.md, {args.out}.csv")
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
