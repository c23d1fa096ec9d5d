"""The run's results in other tools' formats: the results JSON, the leaderboard, Every Eval Ever and the viewer."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from h2htalk.cells import RunCells
from h2htalk.instances.sources import run_notes
from h2htalk.layout import Layout
from h2htalk.settings import BootstrapSettings
from h2htalk.stages.declare import stage
from h2htalk.stages.declared import CELLS, REGISTRY, RUBRIC_JUDGE_MODE, RUN_NOTES, registry_files, rubric_ladders
from h2htalk.stages.spec import Done, Figure, Paths, Product, bundle, figure_files

EXPORT = (*CELLS, *RUN_NOTES, *REGISTRY, "tables")


def _item_files(scope, labels):
    """Every cell's summary and per-item file (scores, J, the studies' verdicts)."""
    from h2htalk.export.items import item_files
    from h2htalk.export.summaries import summary_paths

    return [*summary_paths(scope.run, scope.results), *item_files(scope.run, scope.results)]


def _export_summaries(scope, labels):
    """Every cell's summary (Table 2's, and the studies')."""
    from h2htalk.export.summaries import summary_paths

    return summary_paths(scope.run, scope.results)


def _registry(files: list[str]) -> dict[str, Any]:
    from h2htalk.config import load_registry

    return load_registry(files)


@stage(
    "results_json",
    "the run's results in one JSON file, after lm-eval's results_*.json: config and its hash, versions, every"
    " cell with n, value, CI and measure, the studies' table rows, provenance",
    reads=EXPORT, env="export", memory_mb=1000, minutes=10,
    product=Product("export", "Results", "every number of the run, laid out after lm-eval's results file", main="json"),
    inputs={
        "summaries": Paths(_export_summaries), "registry": Paths(registry_files),
        "safety": Figure("table3", ".csv"), "instruction_following": Figure("fig7_instruction_following", ".csv"),
    },
    outputs=figure_files("results", json=".json"),
)  # fmt: skip
def results_json(
    summaries: list[str], registry: list[str], safety: str, instruction_following: str, json: str,
    config: dict[str, Any], results: Layout,
) -> Done:  # fmt: skip
    from h2htalk.export.run_results import build_run_results
    from h2htalk.io import write_json_atomic

    tables = {"safety": safety, "instruction_following": instruction_following}
    present = {study: path for study, path in tables.items() if os.path.isfile(path)}
    record = build_run_results(config, results, _registry(registry), present, run_notes(config))
    write_json_atomic(json, record)
    cells = sum(len(row["tasks"]) for row in record["results"])
    return Done(f"{len(record['results'])} rows, {cells} cells, studies: {', '.join(present) or 'none'}", out=json)


@stage(
    "leaderboard", "Table 2's rows ranked by Overall, per embedder and variant (and within each size group), as JSON",
    reads=(*EXPORT, "scoring.bootstrap", *RUBRIC_JUDGE_MODE), env="export",
    memory_mb=1000, minutes=10,
    product=Product("export", "Leaderboard", "the models ranked by Overall, per embedder and variant", main="json"),
    inputs={"summaries": Paths(_export_summaries), "registry": Paths(registry_files), "ladders": Paths(rubric_ladders)},
    outputs=figure_files("leaderboard", json=".json"),
)  # fmt: skip
def leaderboard(
    summaries: list[str], registry: list[str], ladders: list[str], provenance: str, json: str,
    config: dict[str, Any], run: RunCells, results: Layout, bootstrap: BootstrapSettings,
) -> Done:  # fmt: skip
    from h2htalk.export.leaderboard import build_leaderboard
    from h2htalk.export.summaries import read_summaries, table_rows
    from h2htalk.io import read_json, write_json_atomic
    from h2htalk.reliability.standing import rubric_standings, standing_notes

    tables, entries = config["tables"], _registry(registry)
    rows = table_rows(read_summaries(run, results), entries, tables["overall_weights"], tables["judged_cell"])
    judges = rubric_standings(config, results, ladders, bootstrap)
    notes = [*run_notes(config), *standing_notes(judges, "Cells")]
    board = build_leaderboard(rows, entries, read_json(provenance), notes, judges)
    write_json_atomic(json, board)
    return Done(f"{len(board['boards'])} boards of {len(rows)} rows", out=json)


@stage(
    "every_eval_ever",
    "every item in the Every Eval Ever schema (aggregate and samples per model, variant and embedder),"
    " checked by every-eval-ever's own validator",
    uses=("judge",),
    reads=(*EXPORT, "instances.files", "rubric_judge.model", "rubric_judge.temperature", "rubric_judge.samples",
           "rubric_judge.alpha", "rubric_judge.tau", "rubric_judge.gate_on"),
    env="export", memory_mb=4000, minutes=60,
    product=Product("export", "Every Eval Ever", "every item in that schema, validated", main="bundle",
                    inner="validation.json"),
    in_all=lambda config: False,  # made on request: snakemake every_eval_ever
    inputs={"per_item": Paths(_item_files), "registry": Paths(registry_files)},
    outputs=bundle("every_eval_ever"),
)  # fmt: skip
def every_eval_ever(
    per_item: list[str], registry: list[str], bundle: str, config: dict[str, Any], results: Layout
) -> Done:
    from h2htalk.export.eee_validation import write_validation
    from h2htalk.export.every_eval_ever import write_every_eval_ever

    files = write_every_eval_ever(config, results, _registry(registry), Path(bundle))
    validation = write_validation(Path(bundle))
    return Done(
        f"{len(files)} files, {validation['records']} records; every-eval-ever {validation['version']} validates "
        "all of them",
        out=Path(bundle),
    )


@stage(
    "viewer", "a static HTML bundle that shows every item (prompt, answer, reference, scores, judge, flags) from disk",
    uses=("viewer",), reads=(*CELLS, *RUN_NOTES, *REGISTRY, "tables.judged_cell"), env="export", memory_mb=4000,
    minutes=60,
    product=Product("export", "Viewer", "every item beside its reference: open it from disk", main="bundle",
                    inner="index.html"),
    inputs={"per_item": Paths(_item_files), "registry": Paths(registry_files)},
    outputs=bundle("viewer"),
)  # fmt: skip
def viewer(per_item: list[str], registry: list[str], bundle: str, config: dict[str, Any], results: Layout) -> Done:
    from h2htalk.export.viewer import write_viewer

    made = write_viewer(config, results, _registry(registry), Path(bundle), run_notes(config))
    files, size = made.weight()
    return Done(f"{files} files, {size / 1e6:.1f} MB", out=f"{bundle}/index.html")
