"""One results file per run, laid out after lm-evaluation-harness's ``results_*.json``.

lm-eval writes, per run, ``results`` (per task, each metric with its stderr), ``configs`` (each task's
definition), ``versions``, ``n-samples`` (items per task, as released and as evaluated), ``higher_is_better``,
``config`` (how the run was set up), ``git_hash`` and ``date``. This file keeps those names where they mean the
same here and adds what an h2htalk run has besides: several models, variants and embedders (one entry of
``results`` per Table 2 row), a 95 % bootstrap CI instead of a stderr, the measure each cell shows (S, or a
judged cell's reading of J), its coverage (items scored, expected, missing; answers cut off or failed), the seven
metric components, the configuration's hash, the package versions and the provenance. The studies' rows are
those of Table 3 and Figure 7.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from typing import Any

from h2htalk.cells import RunCells
from h2htalk.config import load_registry
from h2htalk.export.models import model_name
from h2htalk.export.summaries import (
    EXPORT,
    CellSummaries,
    components,
    read_summaries,
    shown_value,
    summary_files,
    table_rows,
)
from h2htalk.instances.sources import run_notes
from h2htalk.io import read_csv, read_json, sha256_file, write_json_atomic
from h2htalk.layout import Layout
from h2htalk.scoring.signatures import signature_string
from h2htalk.stages.declare import stage
from h2htalk.stages.declared import registry_files
from h2htalk.stages.spec import Done, Figure, Paths, Product, figure_files
from h2htalk.subtasks import get_subtask
from h2htalk.tables.table2 import Row, column_order, inputs_of

FORMAT = "h2htalk-results/1"
SCORE_RANGE = (0.0, 100.0)  # S, J100 and the judge x20 all lie on 0-100


def task_configs(subtasks: tuple[str, ...], max_new_tokens: Mapping[str, int]) -> dict[str, dict[str, Any]]:
    """What defines each subtask: its names, what it measures and the SHA-256 of its user-message template."""
    configs = {}
    for key in subtasks:
        subtask = get_subtask(key)
        configs[key] = {
            "name": subtask.paper_name,
            "dimension": subtask.dimension,
            "measure": subtask.measure,
            "upstream_file": subtask.upstream_file,
            "persona": subtask.persona,
            "max_new_tokens": max_new_tokens.get(key, subtask.max_new_tokens),
            "template_sha256": hashlib.sha256(subtask.template.encode("utf-8")).hexdigest(),
        }
    return configs


def cell_entry(summaries: CellSummaries, judged_cell: str, results: Layout) -> dict[str, Any]:
    """One cell: the value Table 2 shows with its CI, coverage and measure; the components; the judged cell's
    three readings and review counts; the summaries it comes from, with their checksums."""
    shown = shown_value(summaries, judged_cell)
    n, missing = int(shown["n"]), int(shown["missing"])
    entry: dict[str, Any] = {
        "measure": shown["measure"],
        "value": shown["value"],
        "ci_low": shown["value_ci_low"],
        "ci_high": shown["value_ci_high"],
        "n": n,
        "expected": n + missing,
        "missing": missing,
        "answers": summaries.shown.get("answers", {}),
        "components": components(summaries.score),
        "bootstrap": summaries.shown.get("bootstrap"),
    }
    paths = [results.score_summary(summaries.cell)]
    if summaries.judged is not None:
        judged = summaries.judged
        entry["readings"] = judged["readings"]
        review = (
            "review_mode",
            "estimator",
            "to_review",
            "review_share",
            "human_scored",
            "human_items",
            "human_ratings",
        )
        entry["review"] = {key: judged[key] for key in review if key in judged}
        entry["gate"] = judged.get("gate")
        paths.append(results.j_summary(summaries.cell))
    entry["summaries"] = [{"path": path, "sha256": sha256_file(path)} for path in paths]
    return entry


def row_entry(row: Row, cells: dict[str, CellSummaries], judged_cell: str, results: Layout) -> dict[str, Any]:
    values = row.values()
    aggregates = {
        column: {"value": values.get(column), "complete": not row.incomplete(column), "inputs": inputs_of(column)}
        for column in column_order()
        if column not in row.cells
    }
    return {
        "model": row.model,
        "display_name": row.display_name,
        "size_group": row.size_group,
        "variant": row.variant,
        "embedder": row.embedder,
        "tasks": {key: cell_entry(cells[key], judged_cell, results) for key in row.cells},
        "aggregates": aggregates,
    }


def read_table_rows(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """A table's CSV rows with numbers as numbers and empty cells as None."""

    def value(text: str) -> Any:
        if text == "":
            return None
        for kind in (int, float):
            try:
                return kind(text)
            except ValueError:
                continue
        return text

    return [{key: value(text) for key, text in row.items()} for row in read_csv(path)]


@stage(
    "results_json",
    "the run's results in one JSON file, after lm-eval's results_*.json: config and its hash, versions, every"
    " cell with n, value, CI and measure, the studies' table rows, provenance",
    reads=EXPORT, env="export", memory_mb=1000, minutes=10,
    product=Product("export", "Results", "every number of the run, laid out after lm-eval's results file", main="json"),
    inputs={
        "summaries": Paths(summary_files), "registry": Paths(registry_files),
        "safety": Figure("table3", ".csv"), "instruction_following": Figure("fig7_instruction_following", ".csv"),
    },
    outputs=figure_files("results", json=".json"),
)  # fmt: skip
def write_run_results(
    summaries: list[str], registry: list[str], safety: str, instruction_following: str, json: str,
    config: dict[str, Any], results: Layout,
) -> Done:  # fmt: skip
    """The run's results file (``json``): provenance (git, config and its hash, versions, data, hardware), the tasks
    and models, every Table 2 cell by row, the aggregates, and the rows of the studies' tables that exist
    (``safety``: Table 3's CSV, ``instruction_following``: Figure 7's)."""
    tables = {"safety": safety, "instruction_following": instruction_following}
    present = {study: path for study, path in tables.items() if os.path.isfile(path)}
    run, entries = RunCells(config), load_registry(registry)
    provenance_path = results.path("provenance")
    provenance = read_json(provenance_path)
    weights, judged_cell = config["tables"]["overall_weights"], config["tables"]["judged_cell"]
    read = read_summaries(run, results)
    rows = table_rows(read, entries, weights, judged_cell)
    by_row: dict[tuple[str, str, str], dict[str, CellSummaries]] = {}
    for summary in read:
        cell = summary.cell
        by_row.setdefault((cell.embedder or "", cell.model, cell.variant), {})[cell.task] = summary
    signatures: dict[str, list[str]] = {}
    for summary in read:
        text = signature_string(summary.score["signature"]) if "signature" in summary.score else None
        if text and text not in signatures.setdefault(summary.cell.embedder or "", []):
            signatures[summary.cell.embedder or ""].append(text)
    released = {key: get_subtask(key).released for key in run.subtasks}
    evaluated: dict[str, int] = {}  # items per subtask: what every cell of it expects
    for summary in read:
        expected = int(summary.shown["n"]) + int(summary.shown.get("missing", 0))
        evaluated[summary.cell.task] = max(expected, evaluated.get(summary.cell.task, 0))
    models = {}
    for name in run.run_models:
        spec = {"name": name, **entries[name]}
        named = model_name(spec)
        models[name] = {
            "display_name": spec["display_name"],
            "size_group": spec["size_group"],
            "baseline": name in run.baselines,
            "model_id": named.id,
            "engine": named.engine,
            "revision": named.revision,
        }
    record = {
        "format": FORMAT,
        "date": provenance["created_at"],
        "git_hash": provenance["git"]["revision"],
        "git_dirty": provenance["git"]["dirty"],
        "config_sha256": provenance["config_sha256"],
        "config": provenance["config"],
        "versions": {"packages": provenance["packages"], "engines": provenance["engines"]},
        "provenance": {"path": provenance_path, "sha256": sha256_file(provenance_path)},
        "data": {key: provenance["data_manifest"].get(key) for key in ("repo", "commit", "origin", "files")},
        "hardware": provenance["hardware"],
        "notes": run_notes(config),
        "configs": task_configs(run.subtasks, provenance["config"]["generation"]["max_new_tokens"]),
        "n-samples": {key: {"original": released[key], "effective": evaluated.get(key, 0)} for key in run.subtasks},
        "higher_is_better": {key: {get_subtask(key).measure: True} for key in run.subtasks},
        "score_range": list(SCORE_RANGE),
        "judged_cell": judged_cell,
        "overall_weights": {key: weights[key] for key in run.subtasks if key in weights},
        "models": models,
        "signatures": signatures,
        "results": [
            row_entry(row, by_row[(row.embedder, row.model, row.variant)], judged_cell, results) for row in rows
        ],
        "studies": {study: {"table": str(path), "rows": read_table_rows(path)} for study, path in present.items()},
    }
    write_json_atomic(json, record)
    cells = sum(len(row["tasks"]) for row in record["results"])
    return Done(f"{len(record['results'])} rows, {cells} cells, studies: {', '.join(present) or 'none'}")
