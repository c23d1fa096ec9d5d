"""Calibration: what does a score of 40 mean? Chance floor, oracle ceiling, rescaled model scores, SS spread.

Per embedder and subtask: the floor is the random-reference baseline's mean S (a real answer to another
item), the ceiling the oracle's (the reference itself, 100 when everything works); each model's score is
rescaled to (score - floor) / (oracle - floor). The SS of unrelated pairs (the random-reference items) shows
how much an embedder gives for nothing: it differs a lot between BGE-M3 and a CPU embedder.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from h2htalk.io import iter_jsonl, read_json, write_text_atomic
from h2htalk.settings import WITH_SAP
from h2htalk.subtasks import SUBTASKS
from h2htalk.tables.table2 import cell_reading
from h2htalk.tabular import markdown_text, records_frame, write_csv

FLOOR = "baseline-random-reference"
CEILING = "baseline-oracle"


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
    percentiles."""
    out = []
    for embedder, paths in sorted(item_files.items()):
        data = np.array([float(r["ss"]) for path in paths for _, r in iter_jsonl(path) if r["ss"] is not None])
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


def write_calibration(
    summary_paths: Iterable[str],
    floor_items: Mapping[str, Iterable[str]],
    out_prefix: str | os.PathLike[str],
    judged_cell: str,
    run_notes: Iterable[str] = (),
) -> list[dict]:
    """The calibration report (Markdown, ``run_notes`` under its heading) and its CSV at ``out_prefix``."""
    prefix = Path(out_prefix)
    rows = calibration_rows((read_json(p) for p in summary_paths), judged_cell)
    spread = unrelated_ss(floor_items)
    columns = ["embedder", "subtask", "model", "variant", "score", "floor", "oracle", "rescaled"]
    write_csv(records_frame(rows, columns), prefix.with_suffix(".csv"), float_format="{:.3f}")
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
        records_frame([r for r in rows if not r["model"].startswith("baseline-")], columns),
        caption="Models rescaled: (score - floor) / (oracle - floor); 0 = chance, 1 = the reference",
    )
    text = "\n".join(
        [
            "# Calibration: what does a score mean?",
            "",
            *(f"**{note}**\n" for note in run_notes),
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
    write_text_atomic(prefix.with_suffix(".md"), text + "\n")
    return rows
