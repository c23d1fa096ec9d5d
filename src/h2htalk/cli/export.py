"""Export commands: the run's results JSON, its leaderboard, its Every Eval Ever records and the results viewer."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from h2htalk.cli.options import (
    REGISTRY_READS,
    InFigures,
    add_command,
    add_results,
    add_table_output,
    load_config,
    write_meta,
)
from h2htalk.cli.run_notes import RUN_NOTE_READS, run_notes
from h2htalk.cli.tables import CELLS_READS
from h2htalk.config import registry_files
from h2htalk.progress import summary

EXPORT_READS = (*CELLS_READS, *REGISTRY_READS, "tables")
STUDY_TABLES = {"safety": InFigures("table3.csv"),
                "instruction_following": InFigures("fig7_instruction_following.csv")}  # fmt: skip
JUDGE_READS = tuple(f"rubric_judge.{key}" for key in ("model", "temperature", "samples", "alpha", "tau", "gate_on"))


def register(sub: Any) -> None:
    p = add_command(
        sub, "results-json", cmd_results_json,
        "the run's results in one JSON file, after lm-eval's results_*.json: config and its hash, versions, every"
        " cell with n, value, CI and measure, the studies' table rows, provenance",
        reads=(*EXPORT_READS, *RUN_NOTE_READS),
    )  # fmt: skip
    add_results(p)
    add_table_output(p, "results")
    for study, default in STUDY_TABLES.items():
        p.add_argument(f"--{study.replace('_', '-')}-table", default=default, metavar="CSV",
                       help=f"the {study} study's table, included when the file exists ({default})")  # fmt: skip

    p = add_command(
        sub, "leaderboard", cmd_leaderboard,
        "Table 2's rows ranked by Overall, per embedder and variant (and within each size group), as JSON",
        reads=(*EXPORT_READS, *RUN_NOTE_READS),
    )  # fmt: skip
    add_results(p)
    add_table_output(p, "leaderboard")

    p = add_command(
        sub, "every-eval-ever", cmd_every_eval_ever,
        "every item in the Every Eval Ever schema (aggregate and samples per model, variant and embedder),"
        " checked by every-eval-ever's own validator",
        reads=(*EXPORT_READS, *RUN_NOTE_READS, "instances.files", *JUDGE_READS),
    )  # fmt: skip
    add_results(p)
    p.add_argument("--out", type=Path, default=InFigures("every_eval_ever"),
                   help="the export's folder (paper_figures/[SET/]every_eval_ever)")  # fmt: skip

    p = add_command(
        sub, "viewer", cmd_viewer,
        "a static HTML bundle that shows every item (prompt, answer, reference, scores, judge, flags) from disk",
        reads=(*CELLS_READS, *RUN_NOTE_READS, *REGISTRY_READS, "tables.judged_cell"),
    )  # fmt: skip
    add_results(p)
    p.add_argument("--out", type=Path, default=InFigures("viewer"),
                   help="the bundle's folder (paper_figures/[SET/]viewer)")  # fmt: skip


def _registry(config: dict[str, Any]) -> dict[str, Any]:
    from h2htalk.config import load_registry

    return load_registry(registry_files(config))


def cmd_results_json(args: argparse.Namespace) -> int:
    from h2htalk.cells import RunCells
    from h2htalk.export.run_results import build_run_results
    from h2htalk.export.summaries import summary_paths
    from h2htalk.io import write_json_atomic

    config = load_config(args)
    tables = {study: getattr(args, f"{study}_table") for study in STUDY_TABLES}
    present = {study: path for study, path in tables.items() if os.path.isfile(path)}
    record = build_run_results(config, args.results, _registry(config), present, run_notes(config))
    out = args.out.with_suffix(".json")
    write_json_atomic(out, record)
    write_meta(args, [*summary_paths(RunCells(config), args.results), *registry_files(config), *present.values()])
    cells = sum(len(row["tasks"]) for row in record["results"])
    summary(f"{len(record['results'])} rows, {cells} cells, studies: {', '.join(present) or 'none'}", out=out)
    return 0


def cmd_leaderboard(args: argparse.Namespace) -> int:
    from h2htalk.cells import RunCells
    from h2htalk.export.leaderboard import build_leaderboard
    from h2htalk.export.summaries import read_summaries, summary_paths, table_rows
    from h2htalk.io import read_json, write_json_atomic

    config = load_config(args)
    run, registry = RunCells(config), _registry(config)
    tables = config["tables"]
    rows = table_rows(read_summaries(run, args.results), registry, tables["overall_weights"], tables["judged_cell"])
    board = build_leaderboard(rows, registry, read_json(args.results.path("provenance")), run_notes(config))
    out = args.out.with_suffix(".json")
    write_json_atomic(out, board)
    write_meta(args, [*summary_paths(run, args.results), *registry_files(config)])
    summary(f"{len(board['boards'])} boards of {len(rows)} rows", out=out)
    return 0


def _item_inputs(config: dict[str, Any], args: argparse.Namespace) -> list[str]:
    from h2htalk.cells import RunCells
    from h2htalk.export.items import item_files
    from h2htalk.export.summaries import summary_paths

    run = RunCells(config)
    return [*summary_paths(run, args.results), *item_files(run, args.results), *registry_files(config)]


def cmd_every_eval_ever(args: argparse.Namespace) -> int:
    from h2htalk.export.eee_validation import write_validation
    from h2htalk.export.every_eval_ever import write_every_eval_ever

    config = load_config(args)
    files = write_every_eval_ever(config, args.results, _registry(config), args.out)
    validation = write_validation(args.out)
    write_meta(args, _item_inputs(config, args))
    summary(
        f"{len(files)} files, {validation['records']} records; every-eval-ever {validation['version']} validates "
        "all of them",
        out=args.out,
    )
    return 0


def cmd_viewer(args: argparse.Namespace) -> int:
    from h2htalk.export.viewer import write_viewer

    config = load_config(args)
    bundle = write_viewer(config, args.results, _registry(config), args.out, run_notes(config))
    write_meta(args, _item_inputs(config, args))
    files, size = bundle.weight()
    summary(f"{files} files, {size / 1e6:.1f} MB", out=f"{args.out}/index.html")
    return 0
