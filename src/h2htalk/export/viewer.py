"""The results viewer: a static HTML bundle that opens from disk, with no server and no network.

The bundle is a folder: ``index.html``, its script and style, a subset of Noto Sans SC with every character the
bundle shows, and ``data/``. A page opened from ``file://`` may run scripts beside it but not ``fetch()`` them
(Chromium), so the data are JavaScript files that hand their JSON to the page: ``data/run.js``, the index (the
run, its models, variants, subtasks and embedders, and each cell's summary), loaded with the page, and per cell
a file loaded when the cell is first shown. What every model was given is the same for all of them, so a
variant's prompts and references are one file per subtask (``data/prompts/{variant}/{subtask}.js``); a model's
answers, with each embedder's scores, the judge's part and the flags, are one file per cell
(``data/answers/{model}/{variant}/{subtask}.js``).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from h2htalk.cells import RunCells
from h2htalk.config import load_registry
from h2htalk.errors import H2HTalkError
from h2htalk.export.font_subset import subset_font
from h2htalk.export.items import answer_items, read_prompts, read_references
from h2htalk.export.summaries import ITEM_INPUTS, CellSummaries, read_summaries, shown_value
from h2htalk.instances.sources import run_notes
from h2htalk.io import read_json, write_text_atomic
from h2htalk.layout import Cell, Layout
from h2htalk.settings import VARIANT_NAMES
from h2htalk.stages.declare import stage
from h2htalk.stages.declared import CELLS, REGISTRY, RUN_NOTES
from h2htalk.stages.spec import Done, Figure, Product
from h2htalk.subtasks import get_subtask

FORMAT = "h2htalk-viewer/1"
ASSETS = ("index.html", "viewer.js", "viewer.css")
FONT = "NotoSansSC-subset.otf"  # the name viewer.css asks for


@dataclass
class Bundle:
    """A bundle being written: its folder and every character it shows (for the font)."""

    root: Path
    characters: set[str] = field(default_factory=set)

    def write_data(self, key: str, payload: Any, call: str = "data") -> None:
        """``data/{key}.js``: a call that hands ``payload`` to the page (``H2H.data(key, ...)``, or the index)."""
        text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
        self.characters.update(text)
        # JSON allows U+2028 and U+2029 inside strings; escaped, the file reads as JavaScript in every engine
        text = text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
        arguments = text if call == "run" else f"{json.dumps(key)},{text}"
        self.write(f"data/{key}.js", f"H2H.{call}({arguments});\n")

    def write(self, name: str, text: str) -> None:
        write_text_atomic(self.root / name, text)

    def weight(self) -> tuple[int, int]:
        """(files, bytes) of the bundle as written."""
        files = [path for path in self.root.rglob("*") if path.is_file()]
        return len(files), sum(path.stat().st_size for path in files)


def prompt_payload(prompts: dict[str, dict[str, str]], references: dict[str, str]) -> dict[str, Any]:
    """A variant's prompts of one subtask with their references; each distinct system prompt is stored once."""
    systems: list[str] = []
    items = {}
    for item_id, prompt in prompts.items():
        if prompt["system"] not in systems:
            systems.append(prompt["system"])
        items[item_id] = {"system": systems.index(prompt["system"]), "user": prompt["user"],
                          "reference": references.get(item_id, "")}  # fmt: skip
    return {"systems": systems, "items": items}


def answers_payload(by_embedder: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """A cell's answers, each once, with every embedder's scores, judge's part and flags under ``scored``."""
    merged: dict[str, dict[str, Any]] = {}
    for embedder, items in by_embedder.items():
        for item in items:
            entry = merged.setdefault(item["id"], {
                key: item[key] for key in ("id", "answer", "finish_reason", "failure", "reasoning", "tokens")
            } | {"scored": {}})  # fmt: skip
            entry["scored"][embedder] = {"scores": item["scores"], "judge": item["judge"], "flags": item["flags"]}
    return {"items": list(merged.values())}


def cell_summary(summaries: CellSummaries, judged_cell: str) -> dict[str, Any]:
    shown = shown_value(summaries, judged_cell)
    score = summaries.score
    answers = summaries.shown.get("answers", {})
    summary = {
        "measure": shown["measure"],
        "value": shown["value"],
        "ci_low": shown["value_ci_low"],
        "ci_high": shown["value_ci_high"],
        "n": int(shown["n"]),
        "expected": int(shown["n"]) + int(shown["missing"]),
        "S": {"value": score.get("S"), "ci_low": score.get("S_ci_low"), "ci_high": score.get("S_ci_high")},
        "cut_off": answers.get("cut_off", 0),
        "failed": answers.get("failed", 0),
    }
    if summaries.judged is not None:
        summary["to_review"] = summaries.judged.get("to_review", 0)
    return summary


def copy_assets(root: Path) -> list[str]:
    """The page, its script and style; returns their texts (for the font)."""
    folder = resources.files("h2htalk.resources").joinpath("viewer")
    texts = []
    for name in ASSETS:
        text = folder.joinpath(name).read_text(encoding="utf-8")
        write_text_atomic(root / name, text)
        texts.append(text)
    return texts


@stage(
    "viewer", "a static HTML bundle that shows every item (prompt, answer, reference, scores, judge, flags) from disk",
    uses=("viewer",), reads=(*CELLS, *RUN_NOTES, *REGISTRY, "tables.judged_cell"), env="export", memory_mb=4000,
    minutes=60,
    product=Product("export", "Viewer", "every item beside its reference: open it from disk", main="bundle",
                    inner="index.html"),
    inputs=ITEM_INPUTS,
    outputs={"bundle": Figure("viewer", "", directory=True)},
)  # fmt: skip
def write_viewer(
    per_item: list[str], registry: list[str], bundle: str, config: dict[str, Any], results: Layout
) -> Done:
    """The bundle of every Table 2 cell of the run under ``bundle`` (replacing what was there): every item with its
    prompt, answer, reference, components, S, the judge's part and flags, per model, variant and subtask."""
    from h2htalk.figures.plots import packaged_cjk_font

    font = packaged_cjk_font()
    if font is None:
        raise H2HTalkError("the viewer's font (Noto Sans SC, from pylopdf-fonts-zh-cn) is not installed")
    run = RunCells(config)
    provenance = read_json(results.path("provenance"))
    root, entries, notes = Path(bundle), load_registry(registry), run_notes(config)
    if root.exists() and any(root.iterdir()):
        if not (root / "data" / "run.js").is_file():  # replace an earlier bundle, never another folder
            raise H2HTalkError(f"{root} is a folder but not a viewer bundle: choose another --out")
        shutil.rmtree(root)
    made = Bundle(root)
    for text in copy_assets(root):
        made.characters.update(text)

    for variant in run.variants:
        for subtask in run.subtasks:
            prompts = read_prompts(results.prompts(variant, subtask))
            references = read_references(results.references(variant, subtask))
            made.write_data(f"prompts/{variant}/{subtask}", prompt_payload(prompts, references))

    judged_cell = config["tables"]["judged_cell"]
    by_cell: dict[tuple[str, str, str], dict[str, Any]] = {}
    for summaries in read_summaries(run, results):
        cell = summaries.cell
        by_cell.setdefault((cell.model, cell.variant, cell.task), {})[cell.embedder] = summaries
    cells = {}
    for (model, variant, subtask), per_embedder in by_cell.items():
        judged = run.is_judged(Cell(model, variant, subtask))
        answers = {
            embedder: answer_items(results, Cell(model, variant, subtask, embedder), judged)
            for embedder in per_embedder
        }
        key = f"answers/{model}/{variant}/{subtask}"
        made.write_data(key, answers_payload(answers))
        cells[f"{model}/{variant}/{subtask}"] = {
            "answers": key,
            "prompts": f"prompts/{variant}/{subtask}",
            "judged": judged,
            "summary": {e: cell_summary(s, judged_cell) for e, s in per_embedder.items()},
        }

    index = {
        "format": FORMAT,
        "date": provenance.get("created_at", ""),
        "git_hash": provenance.get("git", {}).get("revision"),
        "git_dirty": provenance.get("git", {}).get("dirty"),
        "config_sha256": provenance.get("config_sha256", ""),
        "judged_cell": judged_cell,
        "notes": list(notes),
        "models": [{"name": m, "display_name": entries.get(m, {}).get("display_name", m)} for m in run.run_models],
        "variants": [{"key": v, "name": VARIANT_NAMES.get(v, v)} for v in run.variants],
        "subtasks": [{"key": s, "name": get_subtask(s).paper_name} for s in run.subtasks],
        "embedders": list(run.embedders),
        "cells": cells,
    }
    made.write_data("run", index, call="run")
    subset_font(font, made.characters, root / FONT)
    files, size = made.weight()
    return Done(f"{files} files, {size / 1e6:.1f} MB")
