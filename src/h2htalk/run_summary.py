"""The lines a workflow run ends with: what it made and where, what to open first, and the warnings that matter
(demo instances, a judge or writer of inputs that is also a model under test, Table 2's cells with missing items
or cut-off answers, the judges' reliability card)."""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from h2htalk.io import read_csv
from h2htalk.layout import Layout
from h2htalk.progress import duration

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
    made = [product for product in products_of(config, folder) if product.main.is_file()]
    lines += products(made, folder, started)
    first = [str(product.main) for product in made if product.first]
    if first:
        lines.append((logging.INFO, "Open first: " + ", then ".join(first)))
    lines += [(logging.WARNING, f"Warning: {text}") for text in warnings(config, folder)]
    where = [os.path.relpath(log) for log in logs]
    jobs = f"each job's log is under {job_logs}/."
    lines.append((logging.INFO, f"Full log: {', '.join(where)}; {jobs}" if where else jobs.capitalize()))
    return lines


@dataclass(frozen=True)
class Made:
    """A table, figure or export of the run, as its stage's product names it."""

    title: str
    caption: str
    main: Path
    where: str  # its main file, and the other files of its job that are there
    first: bool


def products_of(config: dict[str, Any], folder: Path) -> list[Made]:
    """Every listed product of the configured run, were its tables folder ``folder``, in pipeline order."""
    from h2htalk.stages.spec import Scope
    from h2htalk.stages.table import product_jobs

    return [Made(*product.about(labels), product.opened(files), product.where(files), product.first)
            for product, labels, files in product_jobs(Scope(config, Layout(figures=str(folder))))
            if product.listed]  # fmt: skip


def products(made: list[Made], folder: Path, started: float) -> list[Line]:
    """One line per table and figure there is: its main file, the other files its stage declares that are there
    (never another stage's file that shares its name's start: table2_pairs.csv is not Table 2's), what it is."""
    if not made:
        return []
    fresh = sum(product.main.stat().st_mtime >= started for product in made)
    lines = [(logging.INFO, f"In {folder}/ ({fresh} of {len(made)} made by this run):")]
    width = max(len(product.title) for product in made)  # the titles in one column, however long
    return lines + [(logging.INFO, f"  {p.title:<{width}} {p.where}: {p.caption}") for p in made]


def warnings(config: dict[str, Any], folder: Path) -> list[str]:
    from h2htalk.instances.sources import run_notes
    from h2htalk.stages.table import table_files

    table2, card = table_files("table2", folder)["csv"], table_files("judge_reliability", folder)["md"]
    return [*run_notes(config), *roles_under_test(config), *table2_gaps(table2), *judge_card(card)]


def roles_under_test(config: dict[str, Any]) -> list[str]:
    """A model under test that also judges (as a role's own judge, or its cheap judge in cascade mode), or writes or
    votes on the inputs, grades or shapes its own work."""
    from h2htalk.cells import RunCells
    from h2htalk.settings import RUBRIC

    run = RunCells(config)
    judged = {RUBRIC: ("the rubric judge (Table 2's Levels I-III)", run.models)}
    studies = ("the study judge (Table 3, Figure 7)", run.study_models)
    roles = [(name, *judged.get(role, studies)) for name, roles in run.judges.items() for role in roles]
    if config["instances"]["source"] == "reconstructed":
        writer = "a writer or voter of the reconstructed inputs"
        roles += [(name, writer, run.models) for name in run.reconstruction_models]
    said = [f"{name} is a model under test and also {role}." for name, role, tested in roles if name in tested]
    return list(dict.fromkeys(said))  # a judge of both studies: said once


def table2_gaps(table2_csv: Path) -> list[str]:
    """Table 2's cells scored on fewer items than expected, and those holding answers cut off at their token limit
    or failed (the CSV's per-cell ``_missing``, ``_cut_off``, ``_failed`` columns)."""
    if not table2_csv.is_file():
        return []
    rows = read_csv(table2_csv)
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
