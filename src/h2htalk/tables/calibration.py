"""Calibration: what does a score of 40 mean? Chance floor, oracle ceiling, rescaled model scores, SS spread.

Per embedder and subtask: the floor is the random-reference baseline's mean S (a real answer to another
item), the ceiling the oracle's (the reference itself, 100 when everything works); each model's score is
rescaled to (score - floor) / (oracle - floor). The SS of unrelated pairs (the random-reference items) shows
how much an embedder gives for nothing: it differs a lot between BGE-M3 and a CPU embedder.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from h2htalk.cells import RunCells
from h2htalk.errors import ConfigError
from h2htalk.instances.sources import run_notes
from h2htalk.io import iter_jsonl, read_json, write_text_atomic
from h2htalk.layout import Cell
from h2htalk.settings import WITH_SAP
from h2htalk.stages.declare import stage
from h2htalk.stages.declared import CELLS, RUN_NOTES, summaries
from h2htalk.stages.spec import Done, Labels, Paths, Product, Scope, figure_files
from h2htalk.subtasks import SUBTASKS
from h2htalk.tables.table2 import cell_reading
from h2htalk.tabular import Files, markdown_text, records_frame, write_csv

FLOOR = "baseline-random-reference"
CEILING = "baseline-oracle"
ECHO = "baseline-echo-input"  # answers with its own input: far above the floor only when inputs give answers away


def calibration_rows(
    summaries: Iterable[dict[str, Any]], judged_cell: str, variant: str = WITH_SAP
) -> list[dict[str, Any]]:
    """One row per (embedder, subtask, model): score (a judged cell's as Table 2 reads it: ``judged_cell``),
    floor, oracle and the rescaled score."""
    table: dict[tuple[str, str], dict[str, float]] = {}
    for summary in summaries:
        if summary["variant"] != variant:
            continue
        value = cell_reading(summary, judged_cell)["value"]
        if value is not None:
            table.setdefault((summary["embedder"], summary["subtask"]), {})[summary["model"]] = float(value)
    rows = []
    for (embedder, subtask), scores in sorted(table.items()):
        floor, ceiling = scores.get(FLOOR), scores.get(CEILING)
        for model, score in sorted(scores.items()):
            rescaled = None
            if floor is not None and ceiling is not None and ceiling - floor > 1e-9:
                rescaled = (score - floor) / (ceiling - floor)
            rows.append(
                {
                    "embedder": embedder,
                    "subtask": subtask,
                    "model": model,
                    "variant": variant,
                    "score": score,
                    "floor": floor,
                    "oracle": ceiling,
                    "rescaled": rescaled,
                }
            )
    return rows


def unrelated_ss(item_files: Mapping[str, Iterable[str | os.PathLike[str]]]) -> list[dict[str, Any]]:
    """SS of unrelated pairs (the random-reference items, by embedder) per embedder: mean and 5th/95th
    percentiles; none where there are no such pairs (every set of one item: no floor, ``no_answer_notes``)."""
    import numpy as np

    out = []
    for embedder, paths in sorted(item_files.items()):
        data = np.array([float(r["ss"]) for path in paths for _, r in iter_jsonl(path) if r["ss"] is not None])
        if data.size == 0:
            out.append({"embedder": embedder, "pairs": 0, "ss_mean": None, "ss_p5": None, "ss_p95": None})
            continue
        out.append(
            {
                "embedder": embedder,
                "pairs": int(data.size),
                "ss_mean": float(data.mean()),
                "ss_p5": float(np.percentile(data, 5)),
                "ss_p95": float(np.percentile(data, 95)),
            }
        )
    return out


def no_answer_notes(summaries: Iterable[dict[str, Any]]) -> list[str]:
    """Why a baseline's cells are empty where it had no answer to give (a one-item set's random reference has
    no floor): one line per baseline and reason, naming the subtasks, instead of a mean of 0."""
    empty: dict[tuple[str, str], list[str]] = {}
    for summary in summaries:
        for note in summary.get("notes", []):
            subtasks = empty.setdefault((summary["model"], note), [])
            if summary["subtask"] not in subtasks:
                subtasks.append(summary["subtask"])
    return [
        f"{model}: no value, not 0, in {', '.join(subtasks)}: {note}."
        for (model, note), subtasks in sorted(empty.items())
    ]


def floor_items(scope: Scope, labels: Labels) -> list[str]:
    """The chance floor's (random-reference baseline's) per-item scores, per embedder and subtask."""
    run = scope.run
    if missing := [name for name in (FLOOR, CEILING) if name not in run.baselines]:  # asked for by name
        raise ConfigError(f"calibration: key 'baselines' lacks {' and '.join(missing)}: the floor and the ceiling")
    return [scope.results.score_items(Cell(FLOOR, run.variants[0], s, e)) for e in run.embedders for s in run.subtasks]


@stage(
    "calibration", "chance floor, oracle, rescaled scores and unrelated-pair SS",
    reads=(*CELLS, *RUN_NOTES, "tables.judged_cell"), env="figures", memory_mb=1000, minutes=10,
    product=Product("table", "Calibration", "every model between the chance floor and the oracle", main="md",
                    shown=("csv",), first=True),
    # it needs the chance floor and the oracle among the baselines
    in_all=lambda config: {FLOOR, CEILING} <= set(config["baselines"]),
    inputs={"summaries": Paths(summaries), "floor_items": Paths(floor_items)},
    outputs=figure_files("calibration", md=".md", csv=".csv"),
)  # fmt: skip
def write_calibration(
    summaries: list[str], floor_items: list[str], config: dict[str, Any], run: RunCells, outputs: Files
) -> Done:
    """The calibration report (``md``, the run's notes under its heading) and its ``csv``; ``floor_items`` are each
    embedder's, in its order."""
    import pandas as pd

    per_embedder = len(floor_items) // max(len(run.embedders), 1)
    by_embedder = {e: floor_items[i * per_embedder : (i + 1) * per_embedder] for i, e in enumerate(run.embedders)}
    read = [read_json(p) for p in summaries]
    rows = calibration_rows(read, config["tables"]["judged_cell"])
    spread = unrelated_ss(by_embedder)
    columns = ["embedder", "subtask", "model", "variant", "score", "floor", "oracle", "rescaled"]
    write_csv(records_frame(rows, columns), outputs["csv"], float_format="{:.3f}")
    order = {s.key: i for i, s in enumerate(SUBTASKS)}
    floor_columns = ["embedder", "subtask", "floor", "oracle"]
    floors = sorted(
        {(r["embedder"], r["subtask"], r["floor"], r["oracle"]) for r in rows},
        key=lambda x: (x[0], order.get(x[1], 99)),
    )
    floor_table = markdown_text(
        pd.DataFrame(floors, columns=floor_columns, dtype=object),
        caption="Chance floor (random reference of the same subtask) and ceiling (oracle), S or J",
    )
    spread_table = markdown_text(
        records_frame(spread, ["embedder", "pairs", "ss_mean", "ss_p5", "ss_p95"]),
        caption="SS (x100) of unrelated pairs: the random-reference answers",
        float_format="{:.3f}",
    )
    models = markdown_text(
        records_frame([r for r in rows if r["model"] not in (FLOOR, CEILING)], columns),
        caption="Models and the other baselines rescaled: (score - floor) / (oracle - floor); 0 = chance, 1 = the "
        "reference",
    )
    text = "\n".join(
        [
            "# Calibration: what does a score mean?",
            "",
            *(f"**{note}**\n" for note in run_notes(config)),
            *(f"{note}\n" for note in no_answer_notes(read)),
            "A score is only meaningful against what answering at random already earns. The random-reference",
            "baseline answers every item with another item's reference of the same subtask (a fluent, in-character",
            "answer to the wrong question); the oracle answers with the item's own reference. Variant: sap.",
            "",
            floor_table,
            models,
            spread_table,
            "Unrelated texts still get a high SS from some embedders; compare embedders before comparing SS or S",
            "across them.",
        ]
    )
    write_text_atomic(outputs["md"], text + "\n")
    return Done(f"{len(rows)} rows")


def echo_above_floor(
    summaries: Iterable[dict[str, Any]], weights: Mapping[str, float], judged_cell: str
) -> list[dict[str, Any]]:
    """Per (embedder, variant): the echo baseline's and the floor's Overall as Table 2 computes it (weighted by
    ``weights``, judged cells read as ``judged_cell`` says) over the subtasks all three of echo, floor and oracle
    have (every subtask in a full run), their difference, and the echo rescaled between floor and oracle."""
    table: dict[tuple[str, str], dict[str, dict[str, float]]] = {}
    for summary in summaries:
        if summary["model"] not in (ECHO, FLOOR, CEILING):
            continue
        value = cell_reading(summary, judged_cell)["value"]
        if value is not None:
            cells = table.setdefault((summary["embedder"], summary["variant"]), {})
            cells.setdefault(summary["model"], {})[summary["subtask"]] = float(value)
    out = []
    for (embedder, variant), by_model in sorted(table.items()):
        if set(by_model) != {ECHO, FLOOR, CEILING}:
            continue
        subtasks = [s.key for s in SUBTASKS if all(s.key in cells for cells in by_model.values())]
        total = sum(weights[k] for k in subtasks)
        if not subtasks or total <= 0:
            continue
        overall = {m: sum(cells[k] * weights[k] for k in subtasks) / total for m, cells in by_model.items()}
        span = overall[CEILING] - overall[FLOOR]
        out.append(
            {
                "embedder": embedder,
                "variant": variant,
                "subtasks": len(subtasks),
                "echo": overall[ECHO],
                "floor": overall[FLOOR],
                "above_floor": overall[ECHO] - overall[FLOOR],
                "rescaled": (overall[ECHO] - overall[FLOOR]) / span if span > 1e-9 else None,
            }
        )
    return out


def echo_notes(summaries: Iterable[dict[str, Any]], weights: Mapping[str, float], judged_cell: str) -> list[str]:
    """Table 2's notes for reconstructed inputs: how far answering with the input itself sits above chance."""
    notes = []
    for row in echo_above_floor(summaries, weights, judged_cell):
        scope = "Overall" if row["subtasks"] == len(SUBTASKS) else f"Overall over {row['subtasks']} subtasks"
        rescaled = "" if row["rescaled"] is None else f", {row['rescaled']:.2f} of the way to the oracle"
        notes.append(
            f"Inputs reconstructed from their references: echoing the input ({ECHO}) scores {scope} "
            f"{row['echo']:.2f}, {row['above_floor']:+.2f} against the random-reference floor's {row['floor']:.2f}"
            f"{rescaled} ({row['embedder']}, {row['variant']})."
        )
    return notes
