"""The lines a workflow run ends with: what it made and where, what to open first, and the warnings that matter
(demo instances, a judge or writer of inputs that is also a model under test, Table 2's cells with missing items
or cut-off answers, the judges' reliability card)."""

from __future__ import annotations

import csv
import logging
import os
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from h2htalk.freshness import table_outputs
from h2htalk.layout import Layout
from h2htalk.progress import duration

# (what it is, its main file in paper_figures/); the files beside it are those its stage declares
PRODUCTS = (
    ("Table 1", "table1.md", "record counts per subtask: released, kept after curation"),
    ("Table 2", "table2.md", "scores per model, variant and subtask (S; J where judged)"),
    ("Calibration", "calibration.md", "every model between the chance floor and the oracle"),
    ("Table 3", "table3.md", "the SAP ablation on high-risk scenarios: similarity, safety, violations"),
    ("Figure 4", "fig4_wordcloud.png", "word cloud of the kept references"),
    ("Figure 5", "fig5_verb_noun.png", "the most frequent verb-noun pairs"),
    ("Figure 6", "fig6_lengths.png", "length distributions of inputs and references"),
    ("Figure 7", "fig7_instruction_following.png", "instruction following per scenario type"),
    ("Agreement", "agreement.md", "raters and judges against people"),
    ("Judge card", "judge_reliability.md", "how reliable each judge is"),
    ("Results", "results.json", "every number of the run, laid out after lm-eval's results file"),
    ("Leaderboard", "leaderboard.json", "the models ranked by Overall, per embedder and variant"),
    ("Viewer", "viewer/index.html", "every item beside its reference: open it from disk"),
    ("Every Eval Ever", "every_eval_ever/validation.json", "every item in that schema, validated"),
)
OPEN_FIRST = ("table2.md", "calibration.md", "judge_reliability.md")

Line = tuple[int, str]  # (logging level, text)


def run_summary(
    config: dict[str, Any],
    paper_figures: str | os.PathLike[str],
    started: float,
    logs: Sequence[str] = (),
    job_logs: str = "results/logs",
) -> list[Line]:
    """The run's closing lines; ``started`` is the run's start (``time.time()``), ``logs`` Snakemake's log,
    ``job_logs`` the folder of the jobs' own logs."""
    folder = Path(paper_figures)
    lines: list[Line] = [(logging.INFO, f"Finished in {duration(time.time() - started)}.")]
    lines += products(config, folder, started)
    first = [str(folder / name) for name in OPEN_FIRST if (folder / name).is_file()]
    if first:
        lines.append((logging.INFO, "Open first: " + ", then ".join(first)))
    lines += [(logging.WARNING, f"Warning: {text}") for text in warnings(config, folder)]
    where = [os.path.relpath(log) for log in logs]
    jobs = f"each job's log is under {job_logs}/."
    lines.append((logging.INFO, f"Full log: {', '.join(where)}; {jobs}" if where else jobs.capitalize()))
    return lines


def products(config: dict[str, Any], folder: Path, started: float) -> list[Line]:
    """One line per table and figure in ``folder``: its main file, the other files its stage declares that are
    there (never another stage's file that shares its name's start: table2_pairs.csv is not Table 2's), what it
    is."""
    found = [(label, folder / main, what) for label, main, what in PRODUCTS if (folder / main).is_file()]
    if not found:
        return []
    declared = [[Path(p) for p in files] for files in table_outputs(config, Layout(figures=str(folder))).values()]
    made = sum(path.stat().st_mtime >= started for _, path, _ in found)
    lines = [(logging.INFO, f"In {folder}/ ({made} of {len(found)} made by this run):")]
    for label, path, what in found:
        stem = path.name.removesuffix(path.suffix)
        files = next((files for files in declared if path in files), [])  # none for a file in a bundle's folder
        beside = sorted(
            p.name.removeprefix(stem) if p.name.startswith(stem) else p.name
            for p in files
            if p != path and not p.name.endswith(".meta.json") and p.is_file()
        )
        also = f" (+ {' '.join(beside)})" if beside else ""
        lines.append((logging.INFO, f"  {label:<12} {path}{also}: {what}"))
    return lines


def warnings(config: dict[str, Any], folder: Path) -> list[str]:
    from h2htalk.instances.sources import run_notes

    return [*run_notes(config), *roles_under_test(config), *table2_gaps(folder / "table2.csv"),
            *judge_card(folder / "judge_reliability.md")]  # fmt: skip


def roles_under_test(config: dict[str, Any]) -> list[str]:
    """A model under test that also judges, or writes or votes on the inputs, grades or shapes its own work."""
    from h2htalk.cells import RunCells

    run = RunCells(config)
    roles = [(config["rubric_judge"]["model"], "the rubric judge (Table 2's Levels I-III)", run.models)]
    if run.study_models:
        roles.append((config["study_judge"]["model"], "the study judge (Table 3, Figure 7)", run.study_models))
    if config["instances"]["source"] == "reconstructed":
        reconstruct = config["instances"]["reconstruct"]
        roles += [(name, "a writer or voter of the reconstructed inputs", run.models)
                  for name in dict.fromkeys([reconstruct["generator"], *reconstruct["voters"]])]  # fmt: skip
    return [f"{name} is a model under test and also {role}." for name, role, tested in roles if name in tested]


def table2_gaps(table2_csv: Path) -> list[str]:
    """Table 2's cells scored on fewer items than expected, and those holding answers cut off at their token limit
    or failed (the CSV's per-cell ``_missing``, ``_cut_off``, ``_failed`` columns)."""
    if not table2_csv.is_file():
        return []
    with open(table2_csv, encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    counts = {"missing": [0, 0], "cut_off": [0, 0], "failed": [0, 0]}  # kind -> [cells, items]
    cells = 0
    for row in rows:
        for column, value in row.items():
            kind = next((k for k in counts if column.endswith(f"_{k}")), None)
            if kind is None or not value:
                continue
            cells += kind == "missing"
            if int(value) > 0:
                counts[kind][0] += 1
                counts[kind][1] += int(value)
    said = {
        "missing": "are scored on fewer items than expected ({items} items missing; table2.md shows scored/expected)",
        "cut_off": "hold answers cut off at their token limit ({items} answers)",
        "failed": "hold answers that failed ({items}; scored as empty)",
    }
    return [
        f"Table 2: {n} of {cells} cells {said[kind].format(items=items)}." for kind, (n, items) in counts.items() if n
    ]


def judge_card(card: Path) -> list[str]:
    """Each judge's verdict from the reliability card: its section's heading and first sentence."""
    if not card.is_file():
        return []
    out = []
    for section in re.split(r"^## ", card.read_text(encoding="utf-8"), flags=re.M)[1:]:
        heading, _, body = section.partition("\n")
        paragraph = next((p.strip() for p in body.split("\n\n") if p.strip()), "")
        first = re.split(r"(?<=[.!?])\s+(?=[A-Z*])", paragraph.replace("\n", " "), maxsplit=1)[0]
        if first:
            out.append(f"{heading.strip()}: {first}")
    return out
